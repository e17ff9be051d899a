"""Automatic mutants of a lesson's reference: one small edit each, made by AST operators, for ``validate``.

Hand-written bugs show what the author thought of; automatic mutants show what the hidden tests miss. Each operator
makes one edit inside a ``### BEGIN SOLUTION`` region (the code students write), keeping the rest of the file as it
is: a constant plus or minus one, a comparison flipped, a call dropped (its receiver or its one argument kept),
``sin`` and ``cos`` swapped, a ``raise`` removed, an arithmetic operator swapped, a unary operator dropped, a
keyword argument dropped, ``and``/``or`` swapped, two positional arguments swapped. ``validate`` drops the mutants
its lesson's probes (the hooks' ``mutant_probes``) cannot tell from the reference, grades the rest like any
submission and reports which were caught, on how many concepts, and each survivor with its diff line.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
from dataclasses import dataclass
from pathlib import Path

from ..errors import KitError
from .toml_file import read_toml

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
COMPARISONS = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
               ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}
ARITHMETIC = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Div,
              ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult, ast.MatMult: ast.Mult}
SWAPPED_NAMES = {"sin": "cos", "cos": "sin"}


@dataclass(frozen=True)
class AutoMutant:
    """One automatic mutant: ``old`` (a piece of ``file``'s source at ``line``) replaced by ``new``."""

    file: str  # the module's file name (``helpers.py``)
    line: int
    operator: str  # which operator made it (``constant``, ``comparison``, ``call dropped`` ...)
    old: str
    new: str
    text: str  # the whole mutated file
    column: int = 0
    before: str = ""  # the edited line(s) as they were, whitespace collapsed
    after: str = ""  # and as the mutant has them
    function: str = ""  # the function (or method) it is in

    @property
    def id(self) -> str:
        """A name for it as a student folder: stable for one reference (the file, line and edit hashed)."""
        digest = hashlib.sha256(f"{self.file}:{self.line}:{self.column}:{self.old}:{self.new}".encode()).hexdigest()[:8]
        return f"auto-{Path(self.file).stem}-{self.line}-{digest}"

    @property
    def key(self) -> str:
        """How a survivor is named where a reason is kept for it (``catalogue/survivors.toml``): its file and edit,
        without the line number (which moves when the reference is edited elsewhere)."""
        return f"{self.file} {self.function}: {self.before} => {self.after}"

    def diff_line(self) -> str:
        """The edit as one line: ``helpers.py:36 (split): return x.transpose(1, 2) => return x``."""
        return f"{self.file}:{self.line} ({self.function}): {self.before} => {self.after}"


def _regions(source: str) -> list[tuple[int, int]]:
    """The line ranges (1-based, inclusive) inside the solution regions."""
    regions, start = [], None
    for number, line in enumerate(source.splitlines(), 1):
        if line.strip().startswith(BEGIN):
            start = number
        elif line.strip().startswith(END) and start is not None:
            regions.append((start + 1, number - 1))
            start = None
    return regions


def _offsets(source: str) -> list[int]:
    """The offset of each line's start (index 0 is line 1)."""
    offsets, total = [], 0
    for line in source.splitlines(keepends=True):
        offsets.append(total)
        total += len(line)
    return offsets


def _replacements(node: ast.AST, segment) -> list[tuple[str, str]]:
    """``(operator, new source)`` for each mutation of ``node`` (whose source is ``segment(node)``)."""
    out = []
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        for step in (1, -1):
            value = node.value + step
            out.append(("constant", repr(value) if value >= 0 else f"({value!r})"))
    elif isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in COMPARISONS:
        flipped = ast.Compare(node.left, [COMPARISONS[type(node.ops[0])]()], node.comparators)
        out.append(("comparison", ast.unparse(flipped)))
    elif isinstance(node, ast.BinOp) and type(node.op) in ARITHMETIC:
        swapped = ast.BinOp(node.left, ARITHMETIC[type(node.op)](), node.right)
        out.append(("arithmetic", f"({ast.unparse(swapped)})"))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Invert, ast.Not)):
        out.append(("unary dropped", segment(node.operand)))
    elif isinstance(node, ast.BoolOp):
        other = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        out.append(("boolean", f"({ast.unparse(ast.BoolOp(other, node.values))})"))
    elif isinstance(node, ast.Call):
        function = node.func
        if isinstance(function, ast.Attribute) and function.attr in SWAPPED_NAMES:
            renamed = ast.Call(ast.Attribute(function.value, SWAPPED_NAMES[function.attr]), node.args, node.keywords)
            out.append(("sin/cos", ast.unparse(renamed)))
        if isinstance(function, ast.Attribute) and not isinstance(function.value, ast.Name):
            out.append(("call dropped", segment(function.value)))  # x.transpose(1, 2) -> x
        elif isinstance(function, ast.Attribute) and function.value.id not in ("torch", "math", "nn", "F", "np"):
            out.append(("call dropped", segment(function.value)))  # x.float() -> x
        if len(node.args) == 1 and not node.keywords and not isinstance(node.args[0], ast.Starred):
            out.append(("call dropped", segment(node.args[0])))  # torch.sin(x) -> x
        for index, keyword in enumerate(node.keywords):
            if keyword.arg is not None:
                kept = [k for position, k in enumerate(node.keywords) if position != index]
                out.append(("keyword dropped", ast.unparse(ast.Call(function, node.args, kept))))
        if len(node.args) == 2 and not any(isinstance(arg, ast.Starred) for arg in node.args):
            swapped = ast.Call(function, node.args[::-1], node.keywords)
            out.append(("arguments swapped", ast.unparse(swapped)))
    return out


def mutants_of(path: Path) -> list[AutoMutant]:
    """Every automatic mutant of one reference module (its solution regions only), each a different file."""
    source = Path(path).read_text(encoding="utf-8")
    tree = ast.parse(source)
    regions = _regions(source)
    offsets = _offsets(source)
    made, seen = [], {source}

    def inside(node):
        return any(first <= node.lineno and node.end_lineno <= last for first, last in regions)

    def segment(node):
        return ast.get_source_segment(source, node)

    owner = {}  # node -> the innermost function it is in
    for function in ast.walk(tree):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(function):
                owner[inner] = function.name

    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and inside(node):
            replacements = [("raise removed", "pass")]
        elif isinstance(node, ast.expr) and inside(node) and not _docstring(node, tree):
            replacements = _replacements(node, segment)
        else:
            continue
        start = offsets[node.lineno - 1] + node.col_offset
        end = offsets[node.end_lineno - 1] + node.end_col_offset
        old = source[start:end]
        for operator, new in replacements:
            if new is None or new == old:
                continue
            text = source[:start] + new + source[end:]
            if text in seen:
                continue
            try:
                ast.parse(text)
            except SyntaxError:
                continue
            seen.add(text)
            first, last = offsets[node.lineno - 1], _line_end(source, end)
            made.append(AutoMutant(Path(path).name, node.lineno, operator, " ".join(old.split()),
                                   " ".join(new.split()), text, node.col_offset,
                                   _plain_line(source[first:last]), _plain_line(text[first:last + len(new) - len(old)]),
                                   owner.get(node, "")))
    # Two identical edits of one line in one function (the same constant twice, say): numbered, so each key is one.
    counts = {}
    for index, mutant in enumerate(made):
        counts[mutant.key] = counts.get(mutant.key, 0) + 1
        if counts[mutant.key] > 1:
            made[index] = dataclasses.replace(mutant, after=f"{mutant.after} (#{counts[mutant.key]})")
    return made


def _line_end(source: str, offset: int) -> int:
    end = source.find("\n", offset)
    return len(source) if end < 0 else end


def _plain_line(text: str) -> str:
    """Source lines as one, whitespace collapsed, a trailing comment left out."""
    code = " ".join(line.split("  #")[0].strip() for line in text.splitlines())
    return " ".join(code.split())


def _docstring(node: ast.AST, tree: ast.Module) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def generate(solutions: Path, modules: tuple[str, ...]) -> list[AutoMutant]:
    """Every automatic mutant of the reference's student modules, in file order."""
    return [mutant for module in modules for mutant in mutants_of(Path(solutions) / f"{module}.py")]


def survivor_reasons(assignment, kind: str = "survivor") -> dict[str, str]:
    """``{mutant key: reason}`` for ``kind`` (``survivor`` or ``equivalent``) from the lesson's
    ``catalogue/survivors.toml`` (none: empty)."""
    path = assignment.catalogue / "survivors.toml"
    if not path.is_file():
        return {}
    entries = read_toml(path, "survivors catalogue").get(kind, [])
    if not isinstance(entries, list) or not all(isinstance(entry, dict) and isinstance(entry.get("edit"), str)
                                                and isinstance(entry.get("reason"), str) for entry in entries):
        raise KitError(f"{path}: each [[{kind}]] needs an edit and a reason (strings)")
    return {entry["edit"]: entry["reason"] for entry in entries}
