"""``ids.csv``, beside the gradebook: each student's id and every name the kit made from it.

An id is kept as its folder is named (``Müller Anna``) in every CSV and report, but file names and
nbgrader's ids must be plain, so they are escaped (``results/M%C3%BCller Anna.json``, nbgrader's
``M_C3_BCller_20Anna``; :mod:`autograder.intake.submission`). This table leads from the id to each of them in one step,
and back: a teaching assistant never decodes an escape by hand. Two marks are the readers' own: a cell that a
spreadsheet would run as a formula (``=...``, ``-1+2``) starts with ``'`` (:mod:`.csv_cells`, whose ``original``
takes it off), and a report shows an id's control characters as escapes (``\\x1b``; :func:`.escape.visible`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..intake.naming import RESULTS
from ..records.results import SubmissionResult, write_atomic
from ..intake.naming import safe_name
from .context import ReportRun
from .csv_cells import table

COLUMNS = ["student", "results", "feedback", "nbgrader_id"]


def names(result: SubmissionResult) -> dict[str, str]:
    """``{column: name}`` of one student: the id, the record and feedback file (relative to the output folder),
    and the id in the nbgrader course (``""`` when the notebook was not graded)."""
    file_name = safe_name(result.student)
    return {"student": result.student, "results": f"{RESULTS}/{file_name}.json",
            "feedback": f"feedback/{file_name}.md",  # reports/feedback.py writes it under the same name
            "nbgrader_id": result.notebook.id if result.notebook is not None else ""}


def write(results: Sequence[SubmissionResult], out_dir: str | Path, run: ReportRun | None = None) -> list[Path]:
    """Write ``ids.csv`` (``run``: unused here; every class report is given it)."""
    # Every cell is text (an id, a name made from it): a formula-like one is written inert (csv_cells.original
    # gives it back).
    path = Path(out_dir) / "ids.csv"
    write_atomic(path, table(COLUMNS, ([names(result)[column] for column in COLUMNS] for result in results)))
    return [path]
