"""``junit.xml``: the class's grades as JUnit XML, for CI dashboards and test-report viewers. One ``<testsuite>``
per student (named by the id), one ``<testcase>`` per check (``classname``: its part); a failed check carries its
feedback's short message, never a check's code. A written answer still to be graded, a check not run on this
machine and a check not checked because a part it needs fails first are ``<skipped>``; a grading that did not
finish is an ``<error>``. Every text is made XML: ids and messages come from students."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from xml.etree import ElementTree

from ..records.results import SubmissionResult, TestResult, write_atomic
from .context import ReportRun
from .escape import plain, visible
from .feedback_view import SHOWN

FILE = "junit.xml"
# What XML 1.0 cannot hold at all, escaped or not: C0 controls but tab and line ends, surrogates, U+FFFE and U+FFFF.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _name(text: str) -> str:
    """An id or a check's name: each control character shown as its escape (as report.md shows it)."""
    return _NOT_XML.sub("", visible(text))


def _line(text: str) -> str:
    """A message: one line, control characters dropped."""
    return _NOT_XML.sub("", plain(text))


def _case(suite: ElementTree.Element, test: TestResult) -> str:
    """Add ``test``'s ``<testcase>`` to ``suite``; return what it counts as (passed, failure, error, skipped)."""
    case = ElementTree.SubElement(suite, "testcase", classname=_name(test.group), name=_name(test.name))
    if test.status == "passed":
        return "passed"
    if test.status == "pending":
        ElementTree.SubElement(case, "skipped", message="to be graded by the instructor")
        return "skipped"
    if not test.counted:
        ElementTree.SubElement(case, "skipped", message=_line(test.output) or "not run on this machine")
        return "skipped"
    if test.blocked_by:  # charged to the part that fails first, which has its own failure
        ElementTree.SubElement(case, "skipped", message=_line(f"not checked: {test.blocked_by} fails first"))
        return "skipped"
    kind = test.cause.kind if test.cause is not None else "failed"
    message = _line(test.concept or test.output.partition("\n")[0]) or "failed"
    outcome = "error" if kind == "check_crashed" else "failure"  # the check's trouble, not the answer's
    failed = ElementTree.SubElement(case, outcome, message=message, type=kind)
    if test.happened and test.visibility in SHOWN:  # as the feedback shows it: a hidden check's idea only
        failed.text = _line(f"What happened: {test.happened}")
    return outcome


def _suite(root: ElementTree.Element, result: SubmissionResult) -> dict[str, int]:
    """Add ``result``'s ``<testsuite>`` to ``root``; return its totals (JUnit's attribute names)."""
    suite = ElementTree.SubElement(root, "testsuite", name=_name(result.student))
    properties = ElementTree.SubElement(suite, "properties")
    for key, value in (("score", result.score), ("max_score", result.max_score)):
        ElementTree.SubElement(properties, "property", name=key, value=f"{value:g}")
    outcomes = [_case(suite, test) for test in result.tests]
    if result.unfinished is not None:  # the grader's failure, in its own words (never the submission's)
        case = ElementTree.SubElement(suite, "testcase", classname="grader", name="grading")
        ElementTree.SubElement(case, "error", message=_line(result.unfinished.reason) or result.unfinished.kind,
                               type=result.unfinished.kind)
        outcomes.append("error")
    totals = {"tests": len(outcomes), "failures": outcomes.count("failure"), "errors": outcomes.count("error"),
              "skipped": outcomes.count("skipped")}
    suite.attrib.update({key: str(value) for key, value in totals.items()}, time=f"{result.execution_time:.3f}")
    return totals


def render(results: Sequence[SubmissionResult]) -> str:
    """The XML document: ``<testsuites>`` with the class's totals, then each student's suite in the order given."""
    root = ElementTree.Element("testsuites", name="autograder")
    totals = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    for result in results:
        for key, value in _suite(root, result).items():
            totals[key] += value
    root.attrib.update({key: str(value) for key, value in totals.items()})
    ElementTree.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(root, encoding="unicode") + "\n"


def write(results: Sequence[SubmissionResult], out_dir: str | Path, run: ReportRun | None = None) -> list[Path]:
    """Write ``out_dir/junit.xml`` (``run``: unused here; every class report is given it)."""
    path = Path(out_dir) / FILE
    write_atomic(path, render(results))
    return [path]
