"""The judge: run the hidden tests against one submission and decide its points.

The judge never imports student code. It runs the hidden tests (plain pytest,
in this trusted process) with a ``student`` fixture that forwards every call
to a sandboxed worker (:mod:`autograder.remote`). Each test's outcome is
captured as a value, crashes and timeouts included, and turned into a
:class:`~autograder.results.TestResult` whose output names the concept, never
the test's code or the expected values.
"""

import contextlib
import io
import tempfile
import time
from pathlib import Path

import pytest

from . import submission as submissions
from .forbidden import scan_submission
from .remote import RemoteSubmission, SubmissionFailure
from .results import SubmissionResult, TestResult
from .rubric import rubric_entry
from .sandbox import choose_sandbox
from .workers import WorkerFactory

HIDDEN_TESTS = Path(__file__).resolve().parent / "hidden_tests"
PLUGIN_NAME = "mha_pe_judge"


def _student_failure(error):
    """The SubmissionFailure behind ``error`` (looking through chains and exception groups), or None."""
    seen = set()
    stack = [error]
    while stack:
        current = stack.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, SubmissionFailure):
            return current
        if isinstance(current, BaseExceptionGroup):
            stack.extend(current.exceptions)
        stack.extend([current.__cause__, current.__context__])
    return None


def _is_assertion(error):
    """Whether ``error`` is a failed check (an AssertionError, possibly inside a hypothesis group)."""
    if isinstance(error, AssertionError):
        return True
    if isinstance(error, BaseExceptionGroup):
        return all(_is_assertion(inner) for inner in error.exceptions)
    return False


class _JudgePlugin:
    """Collects the rubric entries and each test's outcome as values."""

    def __init__(self, submission):
        self.submission = submission
        self.entries = {}  # nodeid -> rubric entry, in collection order
        self.outcomes = {}  # nodeid -> ("passed" | "failed" | "skipped", detail)
        self.problems = []

    def pytest_collection_modifyitems(self, session, config, items):
        for item in items:
            try:
                self.entries[item.nodeid] = rubric_entry(item)
            except ValueError as error:
                self.problems.append(str(error))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        if report.when == "call" or (report.when == "setup" and not report.passed):
            error = call.excinfo.value if call.excinfo else None
            if report.passed:
                self.outcomes[item.nodeid] = ("passed", None)
            elif report.skipped:
                reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else "skipped"
                self.outcomes[item.nodeid] = ("skipped", str(reason).removeprefix("Skipped: "))
            else:
                failure = _student_failure(error)
                if failure is None and not _is_assertion(error):
                    # Neither the student's code nor a check: the grader itself broke. Say so to the instructor.
                    self.problems.append(f"{item.name} ({report.when}) raised {type(error).__name__}: {error}"[:300])
                self.outcomes[item.nodeid] = ("failed", failure)


def _result_for(entry, outcome):
    test_id, name, group, points, concept, visibility, award_if_skipped = entry
    state, detail = outcome
    if state == "passed":
        return TestResult(name, group, points, points, "passed", "", visibility, test_id)
    if state == "skipped":
        if award_if_skipped:
            return TestResult(name, group, points, points, "passed", f"Not checked here ({detail}).", visibility,
                              test_id)
        return TestResult(name, group, 0, points, "failed", f"{concept}\nNot checked: {detail}.", visibility, test_id)
    output = concept if detail is None else f"{concept}\nWhat happened: {detail.summary}"
    return TestResult(name, group, 0, points, "failed", output, visibility, test_id)


def _pytest_args(hidden_dir):
    # --tb=native: the judge never shows tracebacks, and pytest's own formatting parses source (slow).
    args = [str(hidden_dir), "-c", str(hidden_dir / "pytest.ini"), "--rootdir", str(hidden_dir), "-q", "--tb=native",
            "--capture=no", "-W", "ignore::pytest.PytestAssertRewriteWarning"]
    # Plugins the judge does not use; some cost a full gc.collect() or log handler churn per test.
    for unused in ("cacheprovider", "unraisableexception", "threadexception", "logging", "faulthandler",
                   "junitxml", "pastebin", "doctest", "legacypath", "stepwise", "lfplugin"):
        args += ["-p", f"no:{unused}"]
    return args


def collect_rubric(hidden_dir=HIDDEN_TESTS):
    """The rubric entries of every hidden test, in order, without running any of them."""
    plugin = _JudgePlugin(None)
    with contextlib.redirect_stdout(io.StringIO()):
        pytest.main(_pytest_args(hidden_dir) + ["--collect-only"], plugins=[_Named(plugin)])
    if plugin.problems:
        raise ValueError("; ".join(plugin.problems))
    return list(plugin.entries.values())


def run_hidden_tests(submission, hidden_dir=HIDDEN_TESTS):
    """Run every hidden test against ``submission``; return ``(tests, problems)``."""
    plugin = _JudgePlugin(submission)
    args = _pytest_args(hidden_dir)
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        code = pytest.main(args, plugins=[_Named(plugin)])
    problems = list(plugin.problems)
    if code not in (0, 1) and not plugin.entries:
        problems.append(f"pytest could not run the hidden tests (exit code {int(code)}): {sink.getvalue()[-500:]}")
    tests = []
    for nodeid, entry in plugin.entries.items():
        outcome = plugin.outcomes.get(nodeid, ("failed", None))
        tests.append(_result_for(entry, outcome))
    return tests, problems


class _Named:
    """Registers the plugin under a fixed name so the hidden tests' conftest can find it."""

    def __init__(self, plugin):
        self.plugin = plugin

    def pytest_configure(self, config):
        config.pluginmanager.register(self.plugin, PLUGIN_NAME)


def grade_submission(student, files, problems, sandbox, launch, fingerprint="", worker=None):
    """Grade one student's files (already read) and return the SubmissionResult; never raises for student faults.

    ``launch()`` starts a fresh worker over these files (again after a crash); ``worker`` is one already started.
    """
    started = time.monotonic()
    remote = RemoteSubmission(sandbox, launch, forbidden=scan_submission(files), worker=worker)
    notes = []
    if not sandbox.isolated:
        notes.append(sandbox.note or "SANDBOX OFF: student code ran without isolation")
    for module, problem in sorted(problems.items()):
        if problem != "missing":
            notes.append(f"{module}.py was not used: {problem}")
    try:
        tests, grader_problems = run_hidden_tests(remote)
    finally:
        remote.close()
    notes += remote.events + [f"grader problem: {problem}" for problem in grader_problems]
    student_output = remote.output_text()
    return SubmissionResult(
        student=student, tests=tuple(tests), execution_time=time.monotonic() - started, output="\n".join(notes),
        sandbox=sandbox.mode, fingerprint=fingerprint, notes=tuple(notes),
        extra={"student_output": student_output} if student_output else {},
    )


@contextlib.contextmanager
def open_submission(folder, sandbox_mode="auto"):
    """A RemoteSubmission over ``folder`` (for running the hidden tests by hand)."""
    files, _ = submissions.read_files(folder)
    sandbox = choose_sandbox(sandbox_mode)
    with tempfile.TemporaryDirectory(prefix="mha-pe-grade-") as scratch:
        factory = WorkerFactory(sandbox, scratch)
        remote = RemoteSubmission(sandbox, factory.launcher(files, scratch), forbidden=scan_submission(files))
        try:
            yield remote
        finally:
            remote.close()
            factory.close()
