"""A student file's syntax tree, parsed once and walked once for every static scan of the judge
(:mod:`.imports`, :mod:`.forbidden`). Reads the text only: nothing is imported or run.

``ast.walk`` builds a generator per node; the scans met each file's tree four times that way, a few
milliseconds of every submission. Here each top-level statement's nodes are listed once, with a plain stack.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

FAILURES = (SyntaxError, ValueError, RecursionError, MemoryError)  # a parser's limits are the submission's doing


def nodes_under(node: ast.AST) -> list[ast.AST]:
    """``node`` and every node below it (depth first; the scans need the set, not an order)."""
    found, stack = [], [node]
    while stack:
        current = stack.pop()
        found.append(current)
        for field in current._fields:
            value = getattr(current, field, None)
            if isinstance(value, ast.AST):
                stack.append(value)
            elif isinstance(value, list):
                stack.extend(item for item in value if isinstance(item, ast.AST))
    return found


@dataclass(frozen=True)
class ParsedFile:
    """One file's tree: ``parts`` pairs each top-level statement with every node under it."""

    tree: ast.Module
    parts: tuple[tuple[ast.stmt, tuple[ast.AST, ...]], ...]

    def nodes(self) -> list[ast.AST]:
        """Every node of the file (the module node excepted)."""
        return [node for _, under in self.parts for node in under]


def parse(source: str | bytes) -> ParsedFile | None:
    """The file's :class:`ParsedFile`, or None when it does not parse (its import then fails and says so)."""
    if isinstance(source, bytes):
        source = source.decode("utf-8", "replace")
    try:
        tree = ast.parse(source)
    except FAILURES:
        return None
    return ParsedFile(tree, tuple((statement, tuple(nodes_under(statement))) for statement in tree.body))


def parse_files(files: dict[str, bytes]) -> dict[str, ParsedFile | None]:
    """``{module: ParsedFile or None}`` for a submission's files."""
    return {module: parse(data) for module, data in files.items()}
