"""Reports are views of the result records: one module per format, each with ``write(results, out_dir)``."""

from . import class_report, feedback, gradebook

REPORTERS = (gradebook, feedback, class_report)


def write_reports(results, out_dir):
    """Write every report for ``results`` (a list of SubmissionResult) under ``out_dir``; return the paths."""
    written = []
    for reporter in REPORTERS:
        written += reporter.write(results, out_dir)
    return written
