"""Reports are views of the result records, one module per format. A student report's module has
``write(results, out_dir)`` over students taken one by one (:data:`STUDENT_REPORTS`); a class report's module has
``write(results, out_dir, run)`` (:data:`~.context.ClassReport`) and is named in :data:`CLASS_REPORTS`: another
format is its module and one line there."""

from __future__ import annotations

import importlib
from collections.abc import Collection, Sequence
from pathlib import Path

from ..records.results import SubmissionResult
from . import feedback, feedback_text
from .context import ClassReport, ReportRun
from .drawer import Drawer

STUDENT_REPORTS = (feedback, feedback_text)  # each a view of one student's record alone

# {what it writes: the module of this package whose ``write(results, out_dir, run)`` writes it}, in the order they
# are written. report.md comes first: it starts its charts (in the drawer's process) and writes its page last
# (ReportRun.finish_last), so the charts draw while the rest is written. The feedback files are written here for
# the students a grade run has not written yet (``run.written``).
CLASS_REPORTS: dict[str, str] = {
    "report.md": "class_report",
    "gradebook.csv": "gradebook",
    "ids.csv": "ids",
    "feedback/<id>.md": "feedback",
    "feedback/<id>.txt": "feedback_text",
    "junit.xml": "junit",
}
# Imported with the package (grade imports it while the class is graded, never at its end).
WRITERS: dict[str, ClassReport] = {name: importlib.import_module(f"{__name__}.{module}").write
                                   for name, module in CLASS_REPORTS.items()}


def write_student_reports(result: SubmissionResult, out_dir: str | Path) -> list[Path]:
    """Write one student's own reports (their feedback, Markdown and plain text), views of their record alone:
    the grade command writes them as each student's record is final, while the class is still being graded."""
    return [path for reporter in STUDENT_REPORTS for path in reporter.write([result], out_dir)]


def write_reports(results: Sequence[SubmissionResult], out_dir: str | Path, drawer: Drawer | None = None,
                  written: Collection[str] = ()) -> list[Path]:
    """Write every class report of :data:`CLASS_REPORTS` for ``results`` (sorted by id) under ``out_dir``; return
    the paths written. ``drawer``: the process that draws the charts (else a child draws the pass rates);
    ``written``: students whose own reports (:func:`write_student_reports`) are written already, from these same
    records."""
    out_dir, run = Path(out_dir), ReportRun(drawer, frozenset(written))
    paths = [path for write in WRITERS.values() for path in write(results, out_dir, run)]
    return paths + run.finish()
