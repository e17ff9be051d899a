"""A student file's syntax tree, parsed once and walked once for every static scan of the judge
(:mod:`.imports`, :mod:`.forbidden`). Reads the text only: nothing is imported or run.

``ast.walk`` builds a generator per node; the scans met each file's tree four times that way, a few
milliseconds of every submission. Here each top-level statement's nodes are listed once, with a plain stack.
"""

from __future__ import annotations

import ast
import functools
import threading
from dataclasses import dataclass

FAILURES = (SyntaxError, ValueError, RecursionError, MemoryError)  # a parser's limits are the submission's doing
# The parser's own limits, as opposed to a syntax error: a file past them may still compile in the worker (its
# compiler counts nesting otherwise, and a student's other file can raise its recursion limit first), where the
# scans would never have read it. Intake refuses such a file (:func:`beyond_limits`).
LIMITS = (RecursionError, MemoryError)
PARSE_STACK_BYTES = 64 << 20  # the parsing thread's stack: the recursion limit, never the C stack, ends a deep parse


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


CACHED_BYTES = 256 << 10  # files kept parsed for the judge's scans after intake's parse: student-sized ones only


def parse(source: str | bytes) -> ParsedFile | None:
    """The file's :class:`ParsedFile`, or None when it does not parse (a syntax error: its import then fails
    and says so; past the parser's limits: intake refused it, :func:`beyond_limits`)."""
    return _parsed(source)[0]


def beyond_limits(source: str | bytes) -> bool:
    """Whether the parse of ``source`` stops at the parser's limits (nesting thousands of levels deep) rather
    than at a syntax error."""
    return _parsed(source)[1]


def _parsed(source: str | bytes) -> tuple[ParsedFile | None, bool]:
    # Intake parses each file, then the judge's scans read it: the trees of the few files in flight are kept
    # (the next student's, read while this one is graded), never those of a huge file, which are too big to keep.
    return _parsed_kept(source) if len(source) <= CACHED_BYTES else _parse_now(source)


@functools.lru_cache(maxsize=8)
def _parsed_kept(source: str | bytes) -> tuple[ParsedFile | None, bool]:
    return _parse_now(source)


def _parse_now(source: str | bytes) -> tuple[ParsedFile | None, bool]:
    if isinstance(source, bytes):
        source = source.decode("utf-8", "replace")
    outcome = {}

    def run() -> None:
        try:
            outcome["tree"] = ast.parse(source)
        except FAILURES as error:
            outcome["error"] = error

    # In a thread of its own, the parse starts at the same depth wherever it is asked for: how deep a file may
    # nest before it is refused never depends on the caller (and intake and the scans agree on every file).
    size = threading.stack_size(PARSE_STACK_BYTES)
    try:
        worker = threading.Thread(target=run, name="parse", daemon=True)
        worker.start()
    finally:
        threading.stack_size(size)
    worker.join()
    tree = outcome.get("tree")
    if tree is None:
        return None, isinstance(outcome.get("error"), LIMITS)
    return ParsedFile(tree, tuple((statement, tuple(nodes_under(statement))) for statement in tree.body)), False


def parse_files(files: dict[str, bytes]) -> dict[str, ParsedFile | None]:
    """``{module: ParsedFile or None}`` for a submission's files."""
    return {module: parse(data) for module, data in files.items()}
