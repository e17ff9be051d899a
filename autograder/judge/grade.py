"""The judge: run the hidden tests against one submission and decide its points.

The judge never imports student code. It calls the hidden tests (trusted code,
collected once per judge by :mod:`autograder.judge.hidden_suite`) with a ``student``
that forwards every call to a sandboxed worker (:mod:`autograder.judge.remote`).
Each test's outcome is a value, crashes and timeouts included, and becomes a
:class:`~autograder.records.results.TestResult` whose output names the concept, never
the test's code or the expected values.
"""

from __future__ import annotations

import contextlib
import dataclasses
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..intake import submission as submissions
from ..lesson.assignment import Assignment
from ..intake.forbidden import scan_submission
from ..intake import imports, source_tree
from .hidden_suite import HiddenSuite, Outcome, check_key
from ..lesson.reference import load_reference
from .ahead import Plans
from .remote import RemoteSubmission
from .failures import SubmissionFailure, bounded
from ..sandbox.launch import WorkerFactory
from ..records.results import Cause, GraderFailure, SubmissionResult, TestResult
from .rubric import NotChecked, RubricEntry, Symptom, WrongShape
from ..sandbox.isolation import Requested, Sandbox, choose_sandbox


CHECK_CRASHED = "the check could not use this submission's answer"
NOTE_LIMIT = 300
MAX_NOTES = 40
OUTPUT_LIMIT = 64 << 10  # the submission's prints over all its workers (each is capped on its own too)


def _student_failure(error):
    """The SubmissionFailure behind ``error`` (looking through chains and exception groups), or None."""
    return _find(error, SubmissionFailure)


def _find(error, kind):
    """The first exception of type ``kind`` in ``error``, its chain and its groups, or None."""
    seen = set()
    stack = [error]
    while stack:
        current = stack.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, kind):
            return current
        if isinstance(current, BaseExceptionGroup):
            stack.extend(current.exceptions)
        stack.extend([current.__cause__, current.__context__])
    return None


def _own_symptom(error):
    """The :class:`Symptom` that failed the check itself (or one of a group's), never one from its chain: an
    assertion raised while handling another (a check graded again with a stand-in) describes its own run."""
    if isinstance(error, Symptom):
        return error
    if isinstance(error, BaseExceptionGroup):
        return next(filter(None, (_own_symptom(inner) for inner in error.exceptions)), None)
    return None


def _is_assertion(error):
    """Whether ``error`` is a failed check (an AssertionError, possibly inside a hypothesis group)."""
    if isinstance(error, AssertionError):
        return True
    if isinstance(error, BaseExceptionGroup):
        return all(_is_assertion(inner) for inner in error.exceptions)
    return False


def _result_for(entry: RubricEntry, outcome: Outcome) -> tuple[TestResult, GraderFailure | None]:
    """The TestResult of one hidden test from its rubric entry and its Outcome; plus, when the check itself
    crashed, that failure (``check_crashed``; its reason is the instructor's note).

    A check that raises something other than an assertion or a SubmissionFailure has met an answer it could not
    handle (a string where a number belongs, say): the test fails like any wrong answer. That can only come
    from the submission's data (``validate`` proves every check passes on the reference), so it is never a
    grader problem and never earns a second grading, and the note names only the check and the exception type.
    """
    test_id, name, group, points, concept, visibility = (entry.id, entry.name, entry.group, entry.points,
                                                         entry.concept, entry.visibility)
    if outcome.state == "passed":
        return TestResult(name, group, points, points, "passed", "", visibility, test_id), None
    if outcome.state == "skipped":
        if entry.optional:  # this machine cannot run it (no GPU): it counts neither in the score nor in the maximum
            return TestResult(name, group, 0, 0, "skipped", f"Not counted here: {outcome.reason}.", visibility,
                              test_id, cause=Cause("not_run")), None
        happened = f"Not checked: {outcome.reason}."
        return TestResult(name, group, 0, points, "failed", f"{concept}\n{happened}", visibility, test_id,
                          concept=concept, happened=happened, cause=Cause("not_run")), None
    blocked = _find(outcome.error, NotChecked)
    if blocked is not None:  # a part it needs fails first: charged to that part, and the feedback says so
        happened = f"not checked yet: it needs {blocked.part}, which {blocked.reason}; fix {blocked.part} first"
        return TestResult(name, group, 0, points, "failed", f"{concept}\nWhat happened: {happened}", visibility,
                          test_id, blocked_by=blocked.part, charged_to=blocked.topic, concept=concept,
                          happened=happened, cause=Cause("not_checked")), None
    failure = _student_failure(outcome.error)
    crashed = None
    if failure is None and not _is_assertion(outcome.error):
        crashed = GraderFailure("check_crashed", f"{test_id}: {CHECK_CRASHED} ({type(outcome.error).__name__})")
    if failure is not None:
        cause = failure.cause
    elif crashed is not None:
        cause = Cause("check_crashed")
    else:
        cause = Cause("wrong_shape" if _find(outcome.error, WrongShape) is not None else "wrong_value")
    symptom = _own_symptom(outcome.error) if failure is None and crashed is None else None
    happened = failure.summary if failure is not None else bounded(str(symptom), 300) if symptom else ""
    output = f"{concept}\nWhat happened: {happened}" if happened else concept
    return TestResult(name, group, 0, points, "failed", output, visibility, test_id, concept=concept,
                      happened=happened, cause=cause), crashed


class Judge:
    """Grades submissions with the hidden tests, collected and the reference loaded once."""

    def __init__(self, assignment: Assignment) -> None:
        self.assignment = assignment
        self.reference = load_reference(assignment)
        self.suite = HiddenSuite.collect(assignment.hidden_tests, self.reference, assignment.contract)
        self.plans = Plans()  # each check's calls sent ahead, planned at the first submission only

    def run_hidden_tests(self, submission: RemoteSubmission
                         ) -> tuple[list[TestResult], list[GraderFailure], dict[str, str]]:
        """Run every hidden test against ``submission``; return ``(tests, failures, details)``: the results, the
        grader-side failures (suite problems, crashed checks), and ``{test id: the submission's own words}``
        (instructor only)."""
        tests, details = [], {}
        failures = [GraderFailure("suite_problem", problem) for problem in self.suite.problems]
        for case, outcome in self.suite.run({"student": submission, "reference": self.reference}):
            result, crashed = _result_for(case.entry, outcome)
            stood_in = getattr(submission, "stood_in", {}).get(check_key(case))
            if stood_in:  # graded with the lesson's stand-ins for parts that fail their own checks
                result = dataclasses.replace(result, stood_in=tuple(sorted(stood_in)))
            tests.append(result)
            if crashed:
                failures.append(crashed)
            failure = _student_failure(outcome.error) if outcome.error is not None else None
            if failure is not None and failure.detail:
                details[result.id] = failure.detail
        return tests, failures, details

    def grade(self, student: str, files: dict[str, bytes], problems: dict[str, str], sandbox: Sandbox,
              launch: Callable[[], Any], fingerprint: str = "", worker: Any = None) -> SubmissionResult:
        """Grade one student's files (already read) and return the SubmissionResult; never raises for faults
        of the student's. ``launch()`` starts a fresh worker over these files (again after a crash); ``worker``
        is one already started."""
        started = time.monotonic()
        remote = RemoteSubmission(sandbox, launch, self.assignment.contract, worker=worker, files=files,
                                  plans=self.plans)
        notes = []
        if not sandbox.isolated:
            notes.append(sandbox.note or "SANDBOX OFF: student code ran without isolation")
        notes += submissions.Intake(problems=problems).notes()
        parsed = source_tree.parse_files(files)  # once, for both static scans
        remote.unavailable = imports.unavailable_imports(files, self.assignment.contract, parsed)
        notices = tuple(filter(None, [imports.note(remote.unavailable, self.assignment.contract)]))
        notes += notices
        try:
            remote.forbidden = scan_submission(files, self.assignment.contract, parsed)
            tests, failures, details = self.run_hidden_tests(remote)
        finally:
            remote.close()  # the worker was started ahead: it is closed whatever happens here
        if remote.busy:  # the machine could not run it: no test is charged, the run grades this student again
            failure = GraderFailure("machine_busy", bounded(remote.busy, NOTE_LIMIT))
            note = f"not graded: the machine was too busy ({failure.reason})"
            return SubmissionResult(student=student, sandbox=sandbox.mode, fingerprint=fingerprint, output=note,
                                    notes=(note,), grader_failures=(failure,))
        if remote.fault:  # the sandbox's fault, not the student's: no test is charged, a human looks
            failure = GraderFailure("sandbox_fault", bounded(remote.fault, NOTE_LIMIT))
            note = f"not graded: the sandbox failed ({failure.reason})"
            return SubmissionResult(student=student, sandbox=sandbox.mode, fingerprint=fingerprint, output=note,
                                    notes=(note,), grader_failures=(failure,))
        failures = [GraderFailure(failure.kind, bounded(failure.reason, NOTE_LIMIT)) for failure in failures]
        notes = [bounded(note, NOTE_LIMIT) for note in notes + remote.events + [_note(f) for f in failures]]
        notes = notes[:MAX_NOTES]
        extra = {}
        student_output = remote.output_text()
        if student_output:  # the submission's prints: the instructor's view only
            extra["student_output"] = bounded(student_output, OUTPUT_LIMIT)
        if details:  # its exception messages, which may echo hidden inputs: the instructor's view only
            extra["student_messages"] = {test: bounded(text, 400) for test, text in details.items()}
        return SubmissionResult(
            student=student, tests=tuple(tests), execution_time=time.monotonic() - started, output="\n".join(notes),
            sandbox=sandbox.mode, fingerprint=fingerprint, notes=tuple(notes), extra=extra,
            grader_failures=tuple(failures[:MAX_NOTES]),
            notices=tuple(bounded(text, NOTE_LIMIT * 2) for text in notices),
            intake_problems={what: bounded(why, NOTE_LIMIT) for what, why in problems.items()},
        )


def _note(failure: GraderFailure) -> str:
    """A failure in the instructor's words (reports show notes)."""
    return f"grader problem: {failure.reason}" if failure.kind == "suite_problem" else failure.reason


@contextlib.contextmanager
def open_submission(folder: str | Path, assignment: Assignment, sandbox_mode: Requested = "auto"
                    ) -> Iterator[RemoteSubmission]:
    """A RemoteSubmission over ``folder`` (for running the hidden tests by hand)."""
    contract = assignment.contract
    files, _ = submissions.read_files(folder, contract)
    sandbox = choose_sandbox(sandbox_mode)
    with tempfile.TemporaryDirectory(prefix="grade-") as scratch:
        factory = WorkerFactory(sandbox, scratch, assignment)
        remote = RemoteSubmission(sandbox, factory.launcher(files, scratch), contract,
                                  forbidden=scan_submission(files, contract), files=files)
        remote.unavailable = imports.unavailable_imports(files, contract)
        try:
            yield remote
        finally:
            remote.close()
            factory.close()
