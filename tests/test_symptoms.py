"""Feedback that describes the symptom: what the student's code did, in words that give away no hidden input or
value (the dtype returned, the way and size of a shift, too many or too few rows, the first call that raised),
one line for several failures with one likely cause, and how many hidden checks passed."""

import re

import pytest

from autograder.commands.grading import grade_class
from autograder.lesson.catalogue import build, load_catalogue
from autograder.reports import feedback, feedback_text
from autograder.sandbox.isolation import Limits
from lesson import CATALOGUE, LESSON

BUGS = ("pe-float64-table", "shift-matrix-transposed", "pe-table-cached-by-width", "split-float-head-dim",
        "shift-matrix-abs-k")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("symptoms")
    bugs = {bug.id: bug for bug in load_catalogue(CATALOGUE / "bugs.toml", "bug")}
    for name in BUGS:
        build(bugs[name], root / "class" / name, LESSON)
    results = grade_class(root / "class", root / "out", jobs=2, limits=Limits(call_seconds=4.0),
                          emit=lambda line: None, skip_notebook=True)
    return {result.student: result for result in results}


def happened(result, test_id):
    (test,) = [test for test in result.tests if test.id == test_id]
    assert test.status == "failed"
    return test.happened


@pytest.mark.slow
def test_the_dtype_returned_is_named(graded):
    assert happened(graded["pe-float64-table"], "test_table_shape_and_dtype") == \
        "returned float64 where float32 is expected"


@pytest.mark.slow
def test_a_shift_says_which_way_and_how_far_it_moved(graded):
    assert happened(graded["shift-matrix-transposed"], "test_shift_matrix_moves_the_true_encoding").startswith(
        "moves the encoding the opposite way")
    assert happened(graded["shift-matrix-abs-k"], "test_shift_matrix_moves_the_true_encoding").startswith(
        "moves the encoding the opposite way")


@pytest.mark.slow
def test_a_table_of_the_wrong_length_says_so_without_the_length(graded):
    words = happened(graded["pe-table-cached-by-width"], "test_table_shape_and_dtype")
    assert re.fullmatch(r"returned a tensor whose dimension 0 is (longer|shorter) than it should be", words)
    assert not re.search(r"\d{2}", words), "no size is named"


@pytest.mark.slow
def test_a_check_not_checked_yet_names_the_first_call_that_raised_and_its_line(graded):
    words = happened(graded["split-float-head-dim"], "test_heads_are_contiguous_chunks")
    assert re.search(r"it needs split_heads, which raises an error \(see its own checks\): split_heads raised "
                     r"\w+ at heads\.py:\d+; fix split_heads first", words), words


@pytest.mark.slow
def test_the_hidden_checks_line_says_how_many_passed(graded):
    result = graded["split-float-head-dim"]
    text, plain = feedback.render(result), feedback_text.render(result)
    hidden = [test for test in result.tests if test.visibility == "hidden" and test.counted]
    passed = sum(test.status == "passed" for test in hidden)
    assert f"Your score includes {len(hidden)} further checks whose details are not shown: {passed} passed" in text
    assert "whose details are not shown" in plain


def test_a_shared_cause_is_said_once_from_the_typed_records():
    from autograder.records.results import Cause, SubmissionResult, TestResult

    raised = Cause("raised", "IndexError", "heads.py:12")
    tests = tuple(TestResult(f"check {n}", "heads", 0, 2, "failed", "idea", "visible", f"t{n}", concept="idea",
                             cause=raised) for n in range(3))
    other = TestResult("other", "heads", 0, 2, "failed", "idea", "visible", "t9", concept="idea",
                       cause=Cause("raised", "ValueError", "heads.py:40"))
    text = feedback.render(SubmissionResult("s", (*tests, other)))
    assert ("**One likely cause:** 3 failed checks stop at the same error, IndexError at heads.py:12: one fix there "
            "may mend them all.") in text
    assert "ValueError at heads.py:40: one fix" not in text


def test_only_the_checks_own_symptom_is_shown_never_one_from_its_chain():
    """A check graded again with a stand-in fails in its second run: the first run's symptom (in the chain) is not
    what its second run did, so nothing is said; a plain assert's message is never shown."""
    from autograder.judge.grade import _result_for
    from autograder.judge.hidden_suite import Outcome
    from autograder.judge.rubric import RubricEntry, Symptom

    entry = RubricEntry("t", "A check", "attention", 2, "The idea.", topic="idea")
    try:
        try:
            raise Symptom("returned float64 where float32 is expected")
        except Symptom:
            raise AssertionError("values differ at 0.123")  # noqa: B904 - the chain is the point
    except AssertionError as error:
        chained = error
    assert _result_for(entry, Outcome("failed", chained))[0].happened == ""
    own = _result_for(entry, Outcome("failed", Symptom("moves the encoding the opposite way")))[0]
    assert own.happened == "moves the encoding the opposite way" and own.output.endswith(own.happened)
    plain = _result_for(entry, Outcome("failed", AssertionError("values differ at 0.123")))[0]
    assert plain.happened == "" and "0.123" not in plain.output
