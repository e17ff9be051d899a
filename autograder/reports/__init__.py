"""Reports are views of the result records: one module per format, each with ``write(results, out_dir)``."""

from __future__ import annotations

from pathlib import Path

from ..records.results import SubmissionResult
from . import class_report, feedback, feedback_text, gradebook, ids

REPORTERS = (gradebook, ids, feedback, feedback_text, class_report)


def write_reports(results: list[SubmissionResult], out_dir: str | Path) -> list[Path]:
    """Write every report for ``results`` (a list of SubmissionResult) under ``out_dir``; return the paths."""
    written = []
    for reporter in REPORTERS:
        written += reporter.write(results, out_dir)
    return written
