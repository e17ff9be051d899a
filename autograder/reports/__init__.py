"""Reports are views of the result records: one module per format, each with ``write(results, out_dir)``."""

from __future__ import annotations

from pathlib import Path

from ..records.results import SubmissionResult
from . import class_report, feedback, feedback_text, gradebook, ids
from .drawer import Drawer


def write_reports(results: list[SubmissionResult], out_dir: str | Path, drawer: Drawer | None = None
                  ) -> list[Path]:
    """Write every report for ``results`` (a list of SubmissionResult) under ``out_dir``; return the paths. The class
    report's charts start first, in ``drawer``'s process when there is one (else the pass rates in a child), while
    the other reports are written."""
    charts = class_report.start_charts(results, out_dir, drawer)
    written = []
    for reporter in (gradebook, ids, feedback, feedback_text):
        written += reporter.write(results, out_dir)
    return written + class_report.write(results, out_dir, charts)
