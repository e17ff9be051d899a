"""The Check Your Understanding notebook, graded like the code: run by a worker, checked by the judge.

The judge reads the student's notebook with nbformat (trusted code, the
student's bytes as data) and sends the worker only cell sources: the
student's code cells in their order, with the locked cells restored from the
release and the autograded test cells left out. After the last cell, each
autograded check runs HERE, from the SOURCE notebook's cell of that
``grade_id`` (its hidden tests included; the student's copy of a test cell is
never used), in a namespace built from the notebook's names fetched as data.
A notebook function is called through the worker, like the code's functions;
anything that is not data stands in as :class:`NotData`, which fails the
check that touches it with a clear reason. No object the notebook made is
ever live in the judge, so an answer whose ``__eq__`` is always true, an
input transformer or a ``pre_run_cell`` hook changes nothing here.

Shapes: ``Outcome.tests`` holds one TestResult per autograded check (group
``notebook``) and one per written answer (group ``written``; ``pending``
until graded in formgrader, 0 when unchanged from the release, as nbgrader
scores it); ``Outcome.executed`` is the notebook formgrader shows (nbformat
v4, outputs capped, test cells as released plus the verdict, Markdown
escaped).
"""

import ast
import builtins
import copy
import functools
import hashlib
import html
import importlib
import json
import time
from dataclasses import dataclass, field, replace

from . import grader_notes
from ..judge.remote import SubmissionFailure, WorkerCrash, bounded, public_type
from ..records.results import GraderFailure, NotebookSummary, TestResult
from ..worker import protocol

MAX_CELLS = 400
MAX_SOURCE = 1 << 20  # characters of code over all cells
OUTPUT_BUDGET = 256 << 10  # characters of captured output kept per notebook
REASON_LIMIT = 300
TRUSTED_MODULES = ("torch", "math", "torch.nn.functional", "torch.nn")
HIDDEN_BEGIN, HIDDEN_END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"


def _meta(cell):
    """A cell's nbgrader metadata as a dict (anything else counts as none)."""
    metadata = cell.get("metadata") if isinstance(cell, dict) else None
    meta = metadata.get("nbgrader") if isinstance(metadata, dict) else None
    return meta if isinstance(meta, dict) else {}


def _text(source):
    """A cell's source as one string (nbformat allows a list of lines)."""
    if isinstance(source, list):
        return "".join(part for part in source if isinstance(part, str))
    return source if isinstance(source, str) else ""


@dataclass(frozen=True)
class Check:
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

    checks: dict  # grade_id -> Check, in notebook order
    written: dict  # grade_id -> points
    locked: dict  # grade_id -> released source of a locked cell that is not a check
    release_meta: dict  # grade_id -> the release's nbgrader metadata (checksums included)
    release: dict  # the release notebook (its JSON)
    notes: dict = field(default_factory=dict)  # grade_id -> a written answer's grading notes (model answer, rubric)

    @property
    def max_points(self):
        return sum(check.points for check in self.checks.values()) + sum(self.written.values())


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
    released = {_meta(cell).get("grade_id"): cell for cell in release_nb["cells"] if _meta(cell).get("grade_id")}
    checks, written, locked, notes = {}, {}, {}, {}
    for cell in source_nb["cells"]:
        meta, text = _meta(cell), _text(cell["source"])
        grade_id = meta.get("grade_id")
        if not grade_id:
            continue
        if meta.get("grade") and cell["cell_type"] == "code" and not meta.get("solution"):
            shown = _text(released[grade_id]["source"]) if grade_id in released else ""
            check = Check(grade_id, text, float(meta.get("points", 0)), _hidden_lines(text), shown,
                          tuple(_free_names(text)))
            checks[grade_id] = replace(check, code=compile(text, check.filename, "exec"))
        elif meta.get("grade") and meta.get("solution"):
            written[grade_id] = float(meta.get("points", 0))
            notes[grade_id] = grader_notes.solution_text(text)
        elif meta.get("locked") and grade_id in released:
            locked[grade_id] = _text(released[grade_id]["source"])
    release_meta = {grade_id: dict(_meta(cell)) for grade_id, cell in released.items()}
    return NotebookChecks(checks, written, locked, release_meta, release_nb, notes)


# ---------------------------------------------------------------- what the student's names become in the judge

class NotDataError(Exception):
    """A check touched a name whose value is not data."""


class NotData:
    """Stands for a notebook value that is not data: every use fails the check, with the name in the reason."""

    __slots__ = ("_label", "_touched")

    def __init__(self, label, touched):
        object.__setattr__(self, "_label", label)
        object.__setattr__(self, "_touched", touched)

    def _refuse(self, *args, **kwargs):
        self._touched.append(self._label)
        raise NotDataError(self._label)

    def __getattr__(self, name):
        self._refuse()

    def __repr__(self):
        return f"<not data: {self._label}>"

    __hash__ = None


for _name in ("eq", "ne", "lt", "le", "gt", "ge", "bool", "len", "iter", "getitem", "contains", "call", "float",
              "int", "index", "complex", "add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv",
              "floordiv", "rfloordiv", "mod", "rmod", "pow", "rpow", "matmul", "rmatmul", "neg", "pos", "abs",
              "and", "rand", "or", "ror", "xor", "invert", "round", "array", "format", "setattr", "setitem"):
    setattr(NotData, f"__{_name}__", NotData._refuse)


@functools.cache
def _trusted(name):
    """A module a check may use by the notebook's name for it: the judge's own copy, never the notebook's object
    (imported here, not at start-up: the judge's first torch import overlaps its zygote's)."""
    return importlib.import_module(name)


def _plain(value, depth=0):
    """Whether ``value`` (decoded from a reply) is data all the way down."""
    import torch

    if value is None or isinstance(value, (bool, int, float, str, torch.Tensor, torch.dtype)):
        return True
    if isinstance(value, (list, tuple)) and depth < protocol.MAX_DEPTH:
        return all(_plain(item, depth + 1) for item in value)
    if isinstance(value, dict) and depth < protocol.MAX_DEPTH:
        return all(_plain(item, depth + 1) for item in value.values())
    return False


class NotebookFunction:
    """A function the notebook defined: each call goes to the worker with data and comes back as data."""

    def __init__(self, runner, handle, name):
        self._runner, self._handle, self._name = runner, handle, name

    def __call__(self, *args, **kwargs):
        value = self._runner.request({"op": "nbcall", "handle": self._handle, "args": list(args), "kwargs": kwargs},
                                     self._name)
        if not _plain(value):
            self._runner.touched.append(f"what {self._name} returned")
            raise NotDataError(f"what {self._name} returned")
        return value

    def __repr__(self):
        return f"<notebook function {self._name}>"


# ---------------------------------------------------------------- running one notebook

@dataclass
class Outcome:
    """One student's notebook: its TestResults, the executed notebook (or None), and notes."""

    tests: list
    executed: object = None
    reason: str = ""  # why the notebook earned nothing (unreadable, refused, missing)
    notes: list = field(default_factory=list)
    pending: float = 0.0


class _Runner:
    """The judge's side of one notebook worker (a RemoteSubmission used for notebook requests)."""

    def __init__(self, remote, limits):
        self.remote, self.limits, self.touched, self.stopped = remote, limits, [], ""

    def request(self, message, label, seconds=None):
        if self.stopped:
            raise WorkerCrash(label, self.stopped)
        try:
            return self.remote.ask(message, label, seconds)
        finally:
            if self.remote.worker is None:  # it was stopped during this request: its namespace is gone
                self.stopped = self.stopped or "the notebook's process was stopped earlier"


def _reason(text):
    return bounded(" ".join(str(text).split()), REASON_LIMIT)


@dataclass(frozen=True)
class Cell:
    """A student's cell as the judge keeps it: type, source text, and the grade_id it claims (any JSON value)."""

    cell_type: str
    source: str
    grade_id: object = None


def parse(data):
    """``(notebook node, "")`` or ``(None, why it cannot be read)``; never raises."""
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None, "the notebook is not valid JSON"
    if not isinstance(raw, dict) or not isinstance(raw.get("cells"), list):
        return None, "the notebook has no list of cells"
    if len(raw["cells"]) > MAX_CELLS:
        return None, f"the notebook has more than {MAX_CELLS} cells"
    cells = [Cell(cell["cell_type"], _text(cell.get("source")), _meta(cell).get("grade_id"))
             for cell in raw["cells"] if isinstance(cell, dict) and cell.get("cell_type") in ("code", "markdown", "raw")]
    if sum(len(cell.source) for cell in cells) > MAX_SOURCE:
        return None, "the notebook's cells hold more than 1 MB of text"
    return cells, ""


def grade_notebook(data, why_missing, remote, limits, assignment):
    """Run one student's notebook (bytes, or None with ``why_missing``) and check it against ``assignment`` (the
    NotebookChecks); never raises for anything the notebook does. ``remote`` is a RemoteSubmission over the
    student's module files (not started yet)."""
    cells, reason = (None, why_missing) if data is None else parse(data)
    if cells is None:
        return _empty(assignment, reason or "no notebook")
    runner = _Runner(remote, limits)
    plan, seen = [], set()
    for cell in cells:  # the first cell of each known grade_id keeps it (nbgrader's DeduplicateIds)
        grade_id = cell.grade_id
        if not isinstance(grade_id, str) or grade_id in seen or grade_id not in assignment.release_meta:
            grade_id = None
        seen.add(grade_id)
        plan.append((cell, grade_id))
    executed, budget = [], [OUTPUT_BUDGET]
    for index, (cell, grade_id) in enumerate(plan):
        source = cell.source
        if grade_id in assignment.checks:
            executed.append((cell, grade_id, assignment.checks[grade_id].visible_text, None))
            continue
        if grade_id in assignment.locked:
            source = assignment.locked[grade_id]
        outputs = None
        if cell.cell_type == "code" and source.strip():
            outputs = _run_cell(runner, index, source, limits, budget)
        executed.append((cell, grade_id, source, outputs))
    for grade_id in assignment.checks:  # a deleted test cell is still checked (nbgrader's add_missing_cells)
        if grade_id not in seen:
            executed.append((None, grade_id, assignment.checks[grade_id].visible_text, None))
    verdicts = _run_checks(runner, assignment)
    tests, pending = [], 0.0
    for grade_id, check in assignment.checks.items():
        passed, why = verdicts[grade_id]
        tests.append(TestResult(f"notebook: {grade_id}", "notebook", check.points if passed else 0, check.points,
                                "passed" if passed else "failed", "" if passed else why, "visible",
                                f"notebook::{grade_id}"))
    answers = {grade_id: cell for cell, grade_id, _, _ in executed if grade_id in assignment.written}
    for grade_id, points in assignment.written.items():
        state = _written_state(answers.get(grade_id), grade_id, assignment)
        pending += points if state == "pending" else 0
        tests.append(_written_test(grade_id, points, state))
    notebook = _executed_notebook(executed, verdicts, assignment)
    notes = [f"notebook: {runner.stopped}"] if runner.stopped else []
    return Outcome(tests, notebook, "", notes, pending)


def _empty(assignment, reason):
    """Nothing to run: every autograded check fails with ``reason``; written answers score 0 (nothing to grade)."""
    tests = [TestResult(f"notebook: {grade_id}", "notebook", 0, check.points, "failed", _reason(reason), "visible",
                        f"notebook::{grade_id}") for grade_id, check in assignment.checks.items()]
    tests += [_written_test(grade_id, points, "missing") for grade_id, points in assignment.written.items()]
    return Outcome(tests, None, _reason(reason))


def _written_state(cell, grade_id, assignment):
    """``pending``, ``unchanged`` (0, as nbgrader scores an untouched answer) or ``missing``."""
    if cell is None:
        return "missing"
    meta = assignment.release_meta[grade_id]
    return "unchanged" if meta.get("checksum") == checksum(cell.cell_type, cell.source, meta) else "pending"


def checksum(cell_type, source, meta):
    """nbgrader's ``compute_checksum`` of a cell with this type, source and (trusted) nbgrader metadata: the same
    digest, without importing nbgrader in every judge (a test compares the two)."""
    digest = hashlib.md5()
    grade, solution, locked = bool(meta.get("grade")), bool(meta.get("solution")), bool(meta.get("locked"))
    for part in (source, cell_type, str(grade), str(solution), str(locked), meta["grade_id"]):
        digest.update(part.encode("utf-8"))
    if grade:
        digest.update(str(float(meta["points"])).encode("utf-8"))
    return digest.hexdigest()


WRITTEN_OUTPUT = {"pending": "To be graded by your instructor.", "unchanged": "No response.",
                  "missing": "This answer's cell is missing from the notebook."}


def _written_test(grade_id, points, state):
    status = "pending" if state == "pending" else "failed"
    return TestResult(f"written: {grade_id}", "written", 0, points, status, WRITTEN_OUTPUT[state], "visible",
                      f"written::{grade_id}")


def _run_cell(runner, index, source, limits, budget):
    """Run one cell in the worker; its outputs as nbformat dicts (capped), an error included."""
    seconds = limits.cell_seconds
    try:
        value = runner.request({"op": "cell", "source": source, "seconds": seconds}, f"cell {index + 1}",
                               seconds=seconds + 2.0)
    except SubmissionFailure as failure:
        runner.stopped = runner.stopped or f"cell {index + 1} stopped the notebook ({failure.summary})"
        return [_error("CellStopped", runner.stopped)]
    outputs = []
    items = value.get("outputs") if isinstance(value, dict) else None
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            continue
        text = item["text"][: max(budget[0], 0)]
        budget[0] -= len(text)
        if item.get("output_type") == "execute_result":
            outputs.append({"output_type": "execute_result", "execution_count": index + 1, "metadata": {},
                            "data": {"text/plain": text}})
        else:
            outputs.append({"output_type": "stream", "name": "stderr" if item.get("name") == "stderr" else "stdout",
                            "text": text})
    error = value.get("error") if isinstance(value, dict) else None
    if isinstance(error, dict):
        line = error.get("line")
        where = f" (line {line})" if isinstance(line, int) and not isinstance(line, bool) else ""
        outputs.append(_error(str(error.get("ename"))[:100], f"{str(error.get('evalue'))[:2000]}{where}"))
    return outputs


def _error(name, text):
    return {"output_type": "error", "ename": name, "evalue": text, "traceback": [f"{name}: {text}"]}


# ---------------------------------------------------------------- the checks, in the judge

def _free_names(source):
    """Names a check reads that it does not import, minus Python's builtins (the judge's own, always)."""
    tree = ast.parse(source)
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imported.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return sorted({node.id for node in ast.walk(tree) if isinstance(node, ast.Name)} - imported - set(dir(builtins)))


def _namespace_value(runner, name, value):
    """What a notebook name becomes in a check's namespace: data, a trusted module, a function proxy, or NotData."""
    if isinstance(value, protocol.Handle):
        if value.type == "function":
            return NotebookFunction(runner, value.id, name)
        if value.type.startswith("module ") and value.type[len("module "):] in TRUSTED_MODULES:
            return _trusted(value.type[len("module "):])
        return NotData(f"{name} (a module)", runner.touched)
    if isinstance(value, protocol.Unsupported):
        kind = public_type([value.type], "an object of a class of its own")
        return NotData(f"{name} ({kind})", runner.touched)
    if not _plain(value):
        return NotData(name, runner.touched)
    return value


def _run_checks(runner, assignment):
    """``{grade_id: (passed, reason)}``; the reason names what failed, never a hidden test's code or values."""
    wanted = sorted({name for check in assignment.checks.values() for name in check.names})
    fetched, failure = {}, None
    try:
        values = runner.request({"op": "names", "names": wanted}, "reading the notebook's answers")
        fetched = values if isinstance(values, dict) else {}
    except SubmissionFailure as error:
        failure = error
    verdicts = {}
    for grade_id, check in assignment.checks.items():
        if failure is not None or runner.stopped:
            verdicts[grade_id] = (False, _reason(runner.stopped or failure.summary))
            continue
        runner.touched.clear()
        namespace = {"__builtins__": builtins, "__name__": "check"}
        for name, value in fetched.items():
            if isinstance(name, str):
                namespace[name] = _namespace_value(runner, name, copy.deepcopy(value) if _plain(value) else value)
        verdicts[grade_id] = _judge(check, namespace, runner)
    return verdicts


def _judge(check, namespace, runner):
    filename = check.filename
    try:
        exec(check.code, namespace)  # noqa: S102 - the instructor's own test code, compiled once
        return True, ""
    except BaseException as error:  # noqa: BLE001 - any failure of a check is a failed check, never a crash
        line = None
        tb = error.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == filename:
                line = tb.tb_lineno
            tb = tb.tb_next
        hidden = line in check.hidden_lines
        if runner.touched:
            return False, _reason(f"{runner.touched[0]} is not plain data (numbers, strings, booleans, tensors "
                                  "and lists, tuples or dicts of them): the check cannot use it")
        if isinstance(error, SubmissionFailure):
            return False, _reason(f"What happened: {error.summary}")
        if hidden:
            return False, "A further check of this answer, not shown in the notebook, did not pass."
        if isinstance(error, AssertionError):
            message = str(error.args[0]) if error.args and isinstance(error.args[0], str) else ""
            return False, _reason(f"The notebook's check did not pass: {message}" if message
                                  else "The notebook's check for this answer did not pass.")
        if isinstance(error, NameError) and error.name and error.name in check.visible_text:
            return False, _reason(f"{error.name} is not defined in your notebook")
        return False, _reason(f"The check could not use your answer ({public_type([type(error).__name__])}).")


# ---------------------------------------------------------------- the notebook formgrader shows

def _executed_notebook(executed, verdicts, assignment):
    """The autograded notebook (nbformat v4 JSON): the student's cells (Markdown escaped, so formgrader renders
    no HTML of theirs), the locked and test cells as released, the captured outputs, each check's verdict, and
    under each written answer its grading notes (:mod:`autograder.notebook.grader_notes`; the students' text cannot
    open or close their region)."""
    cells = []
    for number, (cell, grade_id, source, outputs) in enumerate(executed, 1):
        kind = cell.cell_type if cell is not None else "code"
        metadata = {"nbgrader": dict(assignment.release_meta[grade_id])} if grade_id else {}
        node = {"cell_type": kind, "id": f"cell-{number}", "metadata": metadata}
        if kind == "code":
            if grade_id in verdicts:
                passed, why = verdicts[grade_id]
                outputs = [] if passed else [_error("CheckFailed", why)]
            node.update(source=grader_notes.defang(source), execution_count=number, outputs=list(outputs or []))
        else:
            node["source"] = grader_notes.defang(html.escape(source, quote=False))
        cells.append(node)
        if grade_id in assignment.notes:
            cells.append(grader_notes.note_cell(grade_id, assignment.written[grade_id], assignment.notes[grade_id],
                                                number))
    return {"cells": cells, "metadata": copy.deepcopy(assignment.release.get("metadata", {})), "nbformat": 4,
            "nbformat_minor": 5}


# ---------------------------------------------------------------- one student's result

def grade_into(result, intake, sandbox, launch, out_dir, lesson, worker=None):
    """``result`` (the code's) with the notebook of ``lesson`` (an Assignment) graded and its tests added, and its
    notebooks written to the nbgrader course; never raises. ``launch()`` starts a worker over the student's
    module files (forked, IPython preloaded); ``worker``: one it started ahead (checked before its first use)."""

    from . import nbgrader_record
    from ..judge.remote import BACKSTOP, RemoteSubmission
    from ..intake.naming import nbgrader_safe_name

    assignment = load_checks(lesson.source_notebook(), lesson.released_notebook())
    name = lesson.notebook
    problem = intake.problems.get("notebook", "missing")
    why_missing = f"no {name} in the submission" if problem == "missing" else f"{name} was not used: {problem}"
    remote = RemoteSubmission(sandbox, launch, lesson.contract, worker=worker, files=intake.files)
    remote.budget = sandbox.limits.notebook_seconds  # CPU seconds; the wall clock only backs it up
    remote.deadline = time.monotonic() + BACKSTOP * sandbox.limits.notebook_seconds
    started = time.monotonic()
    try:
        outcome = grade_notebook(intake.notebook, why_missing, remote, sandbox.limits, assignment)
    except Exception as error:  # noqa: BLE001 - the grader's own fault: this notebook's points, said, never more
        outcome = _empty(assignment, f"the notebook could not be graded (grader error {type(error).__name__})")
    finally:
        remote.close()
    if remote.busy:  # the machine's fault, not the notebook's: the whole student is graded again
        failure = GraderFailure("machine_busy", bounded(remote.busy, 300))
        return replace(result, tests=(), notes=result.notes + (failure.reason,),
                       grader_failures=result.grader_failures + (failure,))
    nbid = nbgrader_safe_name(result.student)
    notes = list(outcome.notes) + remote.events
    try:
        nbgrader_record.write_notebooks(nbgrader_record.course_dir(out_dir), lesson, nbid,
                                        intake.notebook if outcome.executed is not None else None, outcome.executed)
    except OSError as error:
        notes.append(f"the executed notebook could not be written ({type(error).__name__})")
    summary = NotebookSummary(id=nbid, pending_manual=outcome.pending, manual_max=sum(assignment.written.values()),
                              seconds=round(time.monotonic() - started, 3), reason=outcome.reason or "",
                              output=bounded(remote.output_text(), 16 << 10))
    notes = [bounded(note, 300) for note in notes][:10]
    unusable = {"notebook": bounded(problem, 300)} if intake.notebook is None else {}  # as a value, for triage
    return replace(result, tests=result.tests + tuple(outcome.tests), notebook=summary,
                   notes=result.notes + tuple(notes), intake_problems={**result.intake_problems, **unusable},
                   output="\n".join(filter(None, [result.output, *notes])))
