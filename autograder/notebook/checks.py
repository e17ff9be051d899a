"""The source notebook's autograded checks and written answers, read once per lesson (``load_checks``): each
check's code compiled, its hidden lines marked; cells matched by ``grade_id`` and by content (``checksum``)."""

import ast
import builtins
import functools
import json
from dataclasses import dataclass, field, replace

from . import grader_notes


HIDDEN_BEGIN, HIDDEN_END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"


def nbgrader_meta(cell):
    """A cell's nbgrader metadata as a dict (anything else counts as none)."""
    metadata = cell.get("metadata") if isinstance(cell, dict) else None
    meta = metadata.get("nbgrader") if isinstance(metadata, dict) else None
    return meta if isinstance(meta, dict) else {}


def source_text(source):
    """A cell's source as one string (nbformat allows a list of lines)."""
    if isinstance(source, list):
        return "".join(part for part in source if isinstance(part, str))
    return source if isinstance(source, str) else ""


@dataclass(frozen=True)
class NotebookCheck:
    grade_id: str
    source: str  # the source notebook's cell: hidden tests included
    points: float
    hidden_lines: frozenset  # line numbers (1-based) of the hidden region
    visible_text: str  # what the student's copy shows of it
    names: tuple = ()  # the names it reads from the notebook (parsed once, not per student)
    code: object = None  # its source compiled once, as ``<check GRADE_ID>``

    @property
    def filename(self):
        return f"<check {self.grade_id}>"


@dataclass(frozen=True)
class NotebookChecks:
    """What the trusted notebooks say: the checks, the written answers, the locked cells and the release."""

    checks: dict  # grade_id -> NotebookCheck, in notebook order
    written: dict  # grade_id -> points
    locked: dict  # grade_id -> released source of a locked cell that is not a check
    release_meta: dict  # grade_id -> the release's nbgrader metadata (checksums included)
    release: dict  # the release notebook (its JSON)
    notes: dict = field(default_factory=dict)  # grade_id -> a written answer's grading notes (model answer, rubric)


def _hidden_lines(source):
    lines, inside = set(), False
    for number, line in enumerate(source.splitlines(), 1):
        if line.strip() == HIDDEN_BEGIN:
            inside = True
        if inside:
            lines.add(number)
        if line.strip() == HIDDEN_END:
            inside = False
    return frozenset(lines)


@functools.lru_cache(maxsize=4)
def load_checks(source, release):
    """What the trusted notebooks (the source at ``source``, its release at ``release``) say, read once per
    process."""
    source_nb = json.loads(source.read_text(encoding="utf-8"))
    release_nb = json.loads(release.read_text(encoding="utf-8"))
    released = {nbgrader_meta(cell).get("grade_id"): cell for cell in release_nb["cells"] if nbgrader_meta(cell).get("grade_id")}
    checks, written, locked, notes = {}, {}, {}, {}
    for cell in source_nb["cells"]:
        meta, text = nbgrader_meta(cell), source_text(cell["source"])
        grade_id = meta.get("grade_id")
        if not grade_id:
            continue
        if meta.get("grade") and cell["cell_type"] == "code" and not meta.get("solution"):
            shown = source_text(released[grade_id]["source"]) if grade_id in released else ""
            check = NotebookCheck(grade_id, text, float(meta.get("points", 0)), _hidden_lines(text), shown,
                          tuple(free_names(text)))
            checks[grade_id] = replace(check, code=compile(text, check.filename, "exec"))
        elif meta.get("grade") and meta.get("solution"):
            written[grade_id] = float(meta.get("points", 0))
            notes[grade_id] = grader_notes.solution_text(text)
        elif meta.get("locked") and grade_id in released:
            locked[grade_id] = source_text(released[grade_id]["source"])
    release_meta = {grade_id: dict(nbgrader_meta(cell)) for grade_id, cell in released.items()}
    return NotebookChecks(checks, written, locked, release_meta, release_nb, notes)


def free_names(source):
    """Names a check reads from the notebook: read, never bound by the check itself (an assignment, a loop, an
    import), and never a builtin or a dunder name, which stay the judge's own whatever a worker answers."""
    tree = ast.parse(source)
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
    read = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    return sorted(name for name in read - bound - set(dir(builtins)) if not is_dunder(name))


def is_dunder(name):
    """``__name__``-shaped: Python's own names, never one a notebook answers for."""
    return name.startswith("__") and name.endswith("__")
