"""``ids.csv``, beside the gradebook: each student's id and every name the kit made from it.

An id is kept exactly as its folder is named (``Müller Anna``) in every CSV and report, but file names and
nbgrader's ids must be plain, so they are escaped (``results/M%C3%BCller Anna.json``, nbgrader's
``M_C3_BCller_20Anna``; :mod:`autograder.intake.submission`). This table leads from the id to each of them in one step,
and back: a teaching assistant never decodes an escape by hand.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from ..intake.naming import RESULTS
from ..records.results import SubmissionResult, write_atomic
from ..intake.naming import safe_name

COLUMNS = ["student", "results", "feedback", "nbgrader_id"]


def names(result: SubmissionResult) -> dict[str, str]:
    """``{column: name}`` of one student: the id, the record and feedback file (relative to the output folder),
    and the id in the nbgrader course (``""`` when the notebook was not graded)."""
    file_name = safe_name(result.student)
    return {"student": result.student, "results": f"{RESULTS}/{file_name}.json",
            "feedback": f"feedback/{file_name}.md",  # reports/feedback.py writes it under the same name
            "nbgrader_id": result.notebook.id if result.notebook is not None else ""}


def write(results: list[SubmissionResult], out_dir: str | Path) -> list[Path]:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, COLUMNS, lineterminator="\n")
    writer.writeheader()
    for result in results:
        writer.writerow(names(result))
    path = Path(out_dir) / "ids.csv"
    write_atomic(path, buffer.getvalue())
    return [path]
