"""Reports are views of the result records: one module per format, each with ``write(results, out_dir)``."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from ..records.results import SubmissionResult
from . import class_report, feedback, feedback_text, gradebook, ids
from .drawer import Drawer

STUDENT_REPORTS = (feedback, feedback_text)  # each a view of one student's record alone


def write_student_reports(result: SubmissionResult, out_dir: str | Path) -> list[Path]:
    """Write one student's own reports (their feedback, Markdown and plain text), views of their record alone:
    the grade command writes them as each student's record is final, while the class is still being graded."""
    return [path for reporter in STUDENT_REPORTS for path in reporter.write([result], out_dir)]


def write_reports(results: list[SubmissionResult], out_dir: str | Path, drawer: Drawer | None = None,
                  written: Collection[str] = ()) -> list[Path]:
    """Write every report for ``results`` (a list of SubmissionResult) under ``out_dir``; return the paths written.
    The class report's charts start first, in ``drawer``'s process when there is one (else the pass rates in a
    child), while the other reports are written. ``written``: students whose own reports
    (:func:`write_student_reports`) are written already, from these same records."""
    charts = class_report.start_charts(results, out_dir, drawer)
    paths = gradebook.write(results, out_dir) + ids.write(results, out_dir)
    unwritten = [result for result in results if result.student not in written]
    for reporter in STUDENT_REPORTS:
        paths += reporter.write(unwritten, out_dir)
    return paths + class_report.write(results, out_dir, charts)
