"""How the judge collects and calls the hidden tests, and the case tables they use."""

import contextlib
import inspect
import subprocess
import sys
import textwrap

import pytest

from autograder import paths
from autograder.judge.hidden_suite import HiddenSuite
from autograder.lessons.mha_pe.hidden_tests.support import each_case
from autograder.judge.grade import CHECK_CRASHED, _result_for
from lesson import LESSON
from autograder.records.results import GraderFailure
from autograder.judge.rubric import RubricEntry

import rubric_totals

INI = "[pytest]\npython_files = check_*.py\naddopts = -p no:cacheprovider --import-mode=importlib\n" \
      "markers =\n    graded: rubric line\n"

CHECKS = '''
import pytest
from autograder.judge.rubric import graded

GROUP = "demo"

@graded(1, "passes")
def test_passes(student):
    """Passes"""
    assert student == "S"

@graded(2, "fails")
def test_fails(student, reference):
    """Fails"""
    assert student == reference

@graded(3, "skips", optional=True, topic="gpu")
def test_skips(student):
    """Skips"""
    pytest.skip("no GPU")

@graded(1, "crashes")
def test_crashes(student):
    """Crashes"""
    raise RuntimeError("a bug in the check itself")

@graded(1, "parametrized")
@pytest.mark.parametrize("n", [1, 2])
def test_param(student, n):
    """Parametrized"""
    assert n == 1

@graded(1, "wants a fixture the judge lacks")
def test_wants_tmp_path(student, tmp_path):
    """Wants tmp_path"""

@graded(1, "carries a skip mark")
@pytest.mark.skip(reason="never")
def test_marked_skip(student):
    """Marked skip"""
'''


@pytest.fixture(scope="module")
def demo_suite(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hidden")
    (folder / "pytest.ini").write_text(INI)
    (folder / "check_demo.py").write_text(textwrap.dedent(CHECKS))
    return HiddenSuite.collect(folder)


def test_each_outcome_is_captured_as_a_value(demo_suite):
    outcomes = {case.entry.id: outcome for case, outcome in demo_suite.run({"student": "S", "reference": "R"})}
    assert outcomes["test_passes"].state == "passed"
    assert outcomes["test_fails"].state == "failed" and isinstance(outcomes["test_fails"].error, AssertionError)
    assert outcomes["test_skips"].state == "skipped" and outcomes["test_skips"].reason == "no GPU"
    assert outcomes["test_crashes"].state == "failed" and isinstance(outcomes["test_crashes"].error, RuntimeError)
    assert [outcomes[f"test_param[{n}]"].state for n in (1, 2)] == ["passed", "failed"]


def test_a_crashing_check_fails_without_blaming_the_grader_and_an_optional_skip_counts_nowhere(demo_suite):
    """A check that raises on an answer fails like a wrong answer: no grader problem (which would earn a second
    grading), and the note names the check and the exception type, never its message."""
    results = {case.entry.id: _result_for(case.entry, outcome)
               for case, outcome in demo_suite.run({"student": "S", "reference": "R"})}
    crashed, failure = results["test_crashes"]
    assert crashed.score == 0 and crashed.status == "failed"
    assert failure == GraderFailure("check_crashed", f"test_crashes: {CHECK_CRASHED} (RuntimeError)")
    assert results["test_fails"][1] is None  # a failed check is the student's, not the grader's
    skipped, problem = results["test_skips"]
    assert (skipped.score, skipped.max_score, skipped.status, problem) == (0, 0, "skipped", None)
    assert "no GPU" in skipped.output


def test_each_check_names_its_concept_key(demo_suite):
    topics = {case.entry.id: case.entry.topic for case in demo_suite.cases}
    assert topics["test_skips"] == "gpu" and topics["test_passes"] == "test_passes"  # the name when none is given
    assert topics["test_param[1]"] == topics["test_param[2]"] == "test_param"
    skips = next(case.entry for case in demo_suite.cases if case.entry.id == "test_skips")
    assert (skips.points, skips.optional, skips.visibility) == (3, True, "visible")
    assert RubricEntry.from_json(skips.to_json()) == skips


def test_what_the_judge_cannot_honour_is_refused_by_name(demo_suite):
    ids = [case.entry.id for case in demo_suite.cases]
    assert "test_wants_tmp_path" not in ids and "test_marked_skip" not in ids
    problems = " ".join(demo_suite.problems)
    assert "test_wants_tmp_path asks for tmp_path" in problems
    assert "test_marked_skip carries marks the judge does not apply: skip" in problems


def test_every_hidden_test_is_collected_with_only_the_judges_fixtures():
    suite = HiddenSuite.collect(LESSON.hidden_tests)
    assert suite.problems == ()
    assert len(suite.cases) >= 40 and all(rubric_totals.points(case.entry) > 0 for case in suite.cases)
    assert all(case.entry.topic != case.entry.id for case in suite.cases), "every hidden test names its concept key"
    assert all(set(case.fixtures) <= {"student", "reference"} and "student" in case.fixtures for case in suite.cases)


def test_cases_are_the_same_every_time_smallest_first_and_examples_included():
    def check(student, batch, seq):
        pass

    made = [each_case(count=6, examples=[dict(batch=9, seq=9)], batch=range(1, 4), seq=[5, 7])(check)
            for _ in range(2)]
    assert made[0].cases == made[1].cases
    assert made[0].cases[:2] == [{"batch": 1, "seq": 5}, {"batch": 9, "seq": 9}]
    assert len({tuple(sorted(case.items())) for case in made[0].cases}) == len(made[0].cases)
    assert all(case["batch"] in (1, 2, 3, 9) and case["seq"] in (5, 7, 9) for case in made[0].cases)
    # pytest (by hand) sees only the fixtures; the name and docstring stay the check's.
    assert list(inspect.signature(made[0]).parameters) == ["student"] and made[0].__name__ == "check"


def test_a_failing_case_stops_the_check_and_names_itself():
    seen = []

    @each_case(count=5, size=range(1, 50))
    def check(student, size):
        seen.append(size)
        assert size < 2, "too big"

    with pytest.raises(AssertionError) as failure:
        check(student=None)
    assert seen[-1] >= 2 and len(seen) < len(check.cases) + 1
    assert f"case: {{'size': {seen[-1]}}}" in failure.value.__notes__


def test_an_instructor_can_run_the_hidden_tests_by_hand():
    hidden = LESSON.hidden_tests
    run = subprocess.run([sys.executable, "-m", "pytest", "-c", str(hidden / "pytest.ini"), str(hidden),
                          "-q", "-p", "no:cacheprovider", "--submission", str(LESSON.solutions)],
                         cwd=paths.REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:]
    assert " passed" in run.stdout and "failed" not in run.stdout


class _PlanningStudent(str):
    """A student that plans: each check is planned first (called with a planner in its place), then run."""

    def __init__(self, value):
        self.planned = []

    @contextlib.contextmanager
    def calls_ahead(self, cases, key=None):
        for case in cases:
            self.planned.append(case("PLANNER"))
        yield lambda index: None


def test_each_check_plans_its_calls_first_save_a_table_of_cases_and_a_hypothesis_test(tmp_path):
    """Every check that takes the student is planned before it runs (its calls made before it reads an answer
    go to the worker together, see judge/ahead.py); a table of cases plans its own cases, and a hypothesis test
    draws its examples as it runs, so neither is planned here."""
    folder = tmp_path / "hidden"
    folder.mkdir()
    (folder / "pytest.ini").write_text(INI)
    (folder / "check_plans.py").write_text(textwrap.dedent('''
        from autograder.judge.rubric import graded

        def _seen(student):
            return "planned" if student == "PLANNER" else "ran"

        @graded(1, "plain")
        def test_plain(student):
            """Plain"""
            return _seen(student)

        @graded(1, "table")
        def test_table(student):
            """Table"""
            return _seen(student)
        test_table.cases = [{}]

        @graded(1, "drawn")
        def test_drawn(student):
            """Drawn"""
            return _seen(student)
        test_drawn.hypothesis = object()

        @graded(1, "no student")
        def test_reference_only(reference):
            """Reference only"""
    '''))
    suite = HiddenSuite.collect(folder)
    student = _PlanningStudent("S")
    outcomes = {case.entry.id: outcome.state for case, outcome in suite.run({"student": student, "reference": "R"})}
    assert outcomes == dict.fromkeys(("test_plain", "test_table", "test_drawn", "test_reference_only"), "passed")
    assert student.planned == ["planned"]  # test_plain's plan, and no other
