"""One student's notebook, run: the cells parsed from the student's bytes (``parse``), the code cells sent to
the worker one by one with the locked cells restored (``grade_notebook``), written answers scored as nbgrader
scores them (pending, or 0 when unchanged)."""

import hashlib
import json
from dataclasses import dataclass, field

from ..judge.failures import SubmissionFailure, WorkerCrash
from ..records.notebook_groups import NOTEBOOK, WRITTEN
from ..records.results import TestResult
from ..worker.text import NOTE as INVALID_TEXT, valid_text, valid_tree
from .checks import nbgrader_meta, source_text
from .executed import error_output, executed_notebook
from .verdicts import one_line, run_checks


MAX_CELLS = 400
MAX_SOURCE = 1 << 20  # characters of code over all cells
OUTPUT_BUDGET = 256 << 10  # characters of captured output kept per notebook


@dataclass
class NotebookOutcome:
    """One student's notebook: its TestResults, the executed notebook (or None), and notes."""

    tests: list
    executed: object = None
    reason: str = ""  # why the notebook earned nothing (unreadable, refused, missing)
    notes: list = field(default_factory=list)


class _Runner:
    """The judge's side of one notebook worker (a RemoteSubmission used for notebook requests)."""

    def __init__(self, remote, limits):
        self.remote, self.limits, self.touched, self.stopped = remote, limits, [], ""
        self.replaced = False  # a cell's output held invalid text (replaced; the frames' own is the remote's note)

    def request(self, message, label, seconds=None):
        if self.stopped:
            raise WorkerCrash(label, self.stopped)
        try:
            return self.remote.ask(message, label, seconds)
        finally:
            if self.remote.worker is None:  # it was stopped during this request: its namespace is gone
                self.stopped = self.stopped or "the notebook's process was stopped earlier"


@dataclass(frozen=True)
class Cell:
    """A student's cell as the judge keeps it: type, source text, and the grade_id it claims (any JSON value)."""

    cell_type: str
    source: str
    grade_id: object = None


def parse(data):
    """``(cells, "", replaced)`` or ``(None, why it cannot be read, False)``; never raises. Its text is made valid
    (a ``\\udc80`` escape in a cell reads as a lone surrogate, which no notebook file can hold):
    ``replaced`` says some was not."""
    try:
        raw, replaced = valid_tree(json.loads(data.decode("utf-8")))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None, "the notebook is not valid JSON", False
    if not isinstance(raw, dict) or not isinstance(raw.get("cells"), list):
        return None, "the notebook has no list of cells", False
    if len(raw["cells"]) > MAX_CELLS:
        return None, f"the notebook has more than {MAX_CELLS} cells", False
    cells = [Cell(cell["cell_type"], source_text(cell.get("source")), nbgrader_meta(cell).get("grade_id"))
             for cell in raw["cells"] if isinstance(cell, dict) and cell.get("cell_type") in ("code", "markdown", "raw")]
    if sum(len(cell.source) for cell in cells) > MAX_SOURCE:
        return None, "the notebook's cells hold more than 1 MB of text", False
    return cells, "", replaced


def grade_notebook(data, why_missing, remote, limits, assignment):
    """Run one student's notebook (bytes, or None with ``why_missing``) and check it against ``assignment`` (the
    NotebookChecks); never raises for anything the notebook does. ``remote`` is a RemoteSubmission over the
    student's module files (not started yet)."""
    cells, reason, replaced = (None, why_missing, False) if data is None else parse(data)
    if cells is None:
        return empty_outcome(assignment, reason or "no notebook")
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
    verdicts = run_checks(runner, assignment)
    tests = []
    for grade_id, check in assignment.checks.items():
        passed, why = verdicts[grade_id]
        tests.append(TestResult(f"{NOTEBOOK}: {grade_id}", NOTEBOOK, check.points if passed else 0, check.points,
                                "passed" if passed else "failed", "" if passed else why, "visible",
                                f"{NOTEBOOK}::{grade_id}"))
    answers = {grade_id: cell for cell, grade_id, _, _ in executed if grade_id in assignment.written}
    for grade_id, points in assignment.written.items():
        state = _written_state(answers.get(grade_id), grade_id, assignment)
        tests.append(_written_test(grade_id, points, state))
    notebook = executed_notebook(executed, verdicts, assignment)
    notes = [f"notebook: {runner.stopped}"] if runner.stopped else []
    if replaced or runner.replaced:
        notes.append(f"notebook: {INVALID_TEXT}")
    return NotebookOutcome(tests, notebook, "", notes)


def empty_outcome(assignment, reason):
    """Nothing to run: every autograded check fails with ``reason``; written answers score 0 (nothing to grade)."""
    tests = [TestResult(f"{NOTEBOOK}: {grade_id}", NOTEBOOK, 0, check.points, "failed", one_line(reason), "visible",
                        f"{NOTEBOOK}::{grade_id}") for grade_id, check in assignment.checks.items()]
    tests += [_written_test(grade_id, points, "missing") for grade_id, points in assignment.written.items()]
    return NotebookOutcome(tests, None, one_line(reason))


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
    return TestResult(f"{WRITTEN}: {grade_id}", WRITTEN, 0, points, status, WRITTEN_OUTPUT[state], "visible",
                      f"{WRITTEN}::{grade_id}")


def _run_cell(runner, index, source, limits, budget):
    """Run one cell in the worker; its outputs as nbformat dicts (capped), an error included."""
    seconds = limits.cell_seconds
    try:
        value = runner.request({"op": "cell", "source": source, "seconds": seconds}, f"cell {index + 1}",
                               seconds=seconds + 2.0)
    except SubmissionFailure as failure:
        runner.stopped = runner.stopped or f"cell {index + 1} stopped the notebook ({failure.summary})"
        return [error_output("CellStopped", runner.stopped)]
    outputs = []
    items = value.get("outputs") if isinstance(value, dict) else None
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            continue
        text = item["text"][: max(budget[0], 0)]
        valid = valid_text(text)
        runner.replaced = runner.replaced or valid is not text
        text = valid
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
        outputs.append(error_output(valid_text(str(error.get("ename"))[:100]),
                                    f"{valid_text(str(error.get('evalue'))[:2000])}{where}"))
    return outputs
