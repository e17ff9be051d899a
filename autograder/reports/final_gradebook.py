"""``final_gradebook.csv``, for the course's records after formgrader: per student the total (late penalty taken
off), then code, the notebook's autograded checks and its written answers side by side, each with its maximum.
``gradebook.csv`` (:mod:`.gradebook`) is every ``grade`` run's; this one is written by ``final-gradebook`` alone."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from ..records.notebook_groups import NOTEBOOK, NOTEBOOK_GROUPS, WRITTEN, pending_points
from ..records.results import SubmissionResult, TestResult, write_atomic
from .csv_cells import table

FILE = "final_gradebook.csv"
COLUMNS = ["student", "total", "max_total", "code", "max_code", "notebook_auto", "max_notebook_auto",
           "notebook_manual", "max_notebook_manual", "notebook_pending_manual", "late_penalty", "notebook_note"]


def _points(tests: Iterable[TestResult]) -> tuple[float, float]:
    tests = list(tests)
    return sum(test.score for test in tests), sum(test.max_score for test in tests)


def row(result: SubmissionResult) -> list[str | float]:
    """One student's row: numbers as numbers; the total is the parts less the late penalty."""
    code = _points(test for test in result.tests if test.group not in NOTEBOOK_GROUPS)
    auto = _points(test for test in result.tests if test.group == NOTEBOOK)
    manual = _points(test for test in result.tests if test.group == WRITTEN)
    values = [result.score, result.max_score, *code, *auto, *manual, pending_points(result.tests), result.penalty]
    return [result.student, *values, result.notebook.reason if result.notebook else ""]


def render(results: Sequence[SubmissionResult]) -> str:
    """The CSV's text, one row per record in the order given (ids and notes made inert by :mod:`.csv_cells`)."""
    return table(COLUMNS, (row(result) for result in results))


def write(results: Sequence[SubmissionResult], out_dir: str | Path) -> list[Path]:
    """Write ``out_dir/final_gradebook.csv``; return its path, in a list as every report does."""
    path = Path(out_dir) / FILE
    write_atomic(path, render(results))
    return [path]
