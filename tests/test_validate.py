"""``python -m autograder validate``: known submissions through the grade path; its report is printed."""

import re
import subprocess
from dataclasses import replace

import pytest
import torch

from autograder import paths
from autograder.errors import KitError
from autograder.lesson.catalogue import Edit, Mutant, load_catalogue
from autograder.records.results import Cause, SubmissionResult, TestResult
from autograder.commands.validate import (assess, charged_to, diagnosis_matrix, forbidden_naming_nothing, precision,
                                         validate)
from autograder.lesson import assignment as assignments


# The checks of the helpers themselves (each function's own, and the one that reads every function's inputs).
HEADS_CHECKS = {"test_split_shape", "test_heads_are_contiguous_chunks", "test_split_keeps_tokens_apart",
                "test_combine_shape", "test_round_trip", "test_combine_places_heads_in_order",
                "test_heads_keep_the_dtype", "test_heads_work_on_any_device", "test_bad_shapes_raise_value_error",
                "test_inputs_are_left_unchanged"}
TABLE_CHECKS = {"test_table_shape_and_dtype", "test_starts_at_position_zero", "test_sines_even_cosines_odd",
                "test_frequency_exponent", "test_values_follow_the_formula", "test_base_argument_is_used",
                "test_bad_sizes_raise_value_error", "test_table_is_vectorized", "test_encoding_obeys_the_shift_identity"}


@pytest.mark.slow
def test_validate_passes_and_prints_the_report(capsys):
    lines = []
    ok = validate(jobs=2, emit=lines.append)
    report = "\n".join(lines)
    with capsys.disabled():  # the mutation score and the precision are part of every `make test` run's output
        print("\n\n" + "\n".join(line for line in lines if line.startswith(("mutation", "diagnosis precision",
                                                                            "correct variants", "automatic"))))
    assert "reference" in report and "stubs" in report and "mutation score" in report
    assert ok, "\n".join(line for line in lines if "WRONG" in line or "*" in line or "precision" in line)
    assert "(100%)" in report
    matrix = report.split("diagnosis matrix", 1)[1]
    # One slip in split_heads: its own check fails, the code built on it keeps its points with the stand-in.
    assert ("split-view-without-transpose [heads-tokens] -3: test_split_keeps_tokens_apart (heads-tokens); + 1 with "
            "stand-ins") in matrix
    # No catalogued mistake in a helper takes the points of the checks built on it: a check waits for a helper only
    # when it checks that helper (the code built on it runs with its stand-in).
    waits = re.findall(r"(test_\w+) \([\w-]+, waits for (\w+)\)", matrix)
    helpers = {"split_heads": HEADS_CHECKS, "combine_heads": HEADS_CHECKS, "get_positional_encoding": TABLE_CHECKS}
    assert waits and all(test in helpers[part] for test, part in waits if part in helpers), waits
    assert re.search(r"checks waiting for a broken part: \d+ \([\d.]+ points\) over all bugs; graded with a "
                     r"stand-in for one instead: [1-9]\d*", report)
    assert "diagnosis precision:" in report
    # The automatic mutants: graded, caught and charged within two concepts (validate's goals hold when it is ok).
    mutants = re.search(r"automatic mutants: (\d+) made, (\d+) indistinguishable .*, (\d+) graded: (\d+) caught", report)
    assert mutants and int(mutants[1]) > 150 and int(mutants[3]) == int(mutants[1]) - int(mutants[2]) > 150
    assert int(mutants[4]) >= 0.98 * int(mutants[3])
    # Every bug no public test catches is one the catalogue says no public test can see (`not_public`, with why);
    # a forbidden API may still trip a public test by the values it gives, so the report may name fewer.
    unseen = re.search(r"^Caught by no public test: (.*) \((\d+) of (\d+) bugs;", report, re.M)
    lesson = assignments.default()
    bugs = load_catalogue(lesson.catalogue / "bugs.toml", "bug")
    named = set(unseen[1].split(", ")) if unseen else set()
    assert named and named <= {bug.id for bug in bugs if bug.not_public}, unseen
    assert (int(unseen[2]), int(unseen[3])) == (len(named), len(bugs))


def _bug(topics, concept="sqrt(d)", files=("attention.py",)):
    return Mutant("bug", "a bug", tuple(Edit(file=file, new="x") for file in files), concept=concept, topics=topics)


def _failed(test_id, concept, visibility="visible", cause=None, happened=""):
    output = f"{concept}\nWhat happened: {happened}" if happened else concept
    return TestResult(test_id, "attention", 0, 2, "failed", output, visibility, test_id, concept=concept,
                      happened=happened, cause=cause or Cause("wrong_value"))


def test_the_matrix_charges_each_failure_to_a_concept_and_the_precision_counts_them():
    topics = {"test_scaling": "sdpa-scaling", "test_mask": "sdpa-mask", "test_module": "mha-math"}
    result = SubmissionResult("bug", (_failed("test_scaling", "scores are divided by sqrt(d)"),
                                      _failed("test_mask", "The mask ..."),
                                      replace(_failed("test_module", "Not checked: it needs attention"),
                                              blocked_by="scaled_dot_product_attention", charged_to="sdpa-scaling")))
    verdict, = assess({"bug": result}, {"bug": _bug(("sdpa-scaling",))}, {}, topics)
    assert verdict.ok
    assert verdict.failures == (("test_scaling", "sdpa-scaling", True), ("test_mask", "sdpa-mask", False),
                                ("test_module", "sdpa-scaling", True))
    assert precision([verdict]) == (2, 3)
    assert "*test_mask (sdpa-mask)" in diagnosis_matrix([verdict], {"bug": _bug(("sdpa-scaling",))})[1]


def test_a_bug_must_fail_a_visible_check_that_names_it_and_declare_known_concepts():
    topics = {"test_scaling": "sdpa-scaling"}
    hidden_only = SubmissionResult("bug", (_failed("test_scaling", "scores are divided by sqrt(d)", "hidden"),))
    verdict, = assess({"bug": hidden_only}, {"bug": _bug(("sdpa-scaling",))}, {}, topics)
    assert not verdict.ok and "no visible check" in verdict.problem
    named = SubmissionResult("bug", (_failed("test_scaling", "scores are divided by sqrt(d)"),))
    verdict, = assess({"bug": named}, {"bug": _bug(("no-such-concept",))}, {}, topics)
    assert not verdict.ok and "unknown concepts" in verdict.problem


def test_a_forbidden_api_is_charged_to_itself_by_its_cause_never_by_the_words():
    forbidden = Cause("forbidden", apis=("torch.nn.MultiheadAttention",))
    test = _failed("test_module", "...", cause=forbidden, happened="MultiHeadAttention uses a forbidden API")
    assert charged_to(test, "mha-math") == "forbidden"
    # Feedback reworded either way changes nothing: the cause decides.
    assert charged_to(replace(test, output="anything at all", happened="reworded"), "mha-math") == "forbidden"
    imitation = _failed("test_module", "...", happened="uses X: this part asks you to build it yourself")
    assert charged_to(imitation, "mha-math") == "mha-math"


def test_the_concept_a_bug_must_name_is_read_from_the_concept_never_from_what_happened():
    topics = {"test_scaling": "sdpa-scaling"}
    only_happened = SubmissionResult("bug", (_failed("test_scaling", "the scale", happened="scores divided by sqrt(d)"),))
    verdict, = assess({"bug": only_happened}, {"bug": _bug(("sdpa-scaling",))}, {}, topics)
    assert not verdict.ok and "no visible check" in verdict.problem


def test_with_cuda_required_a_skipped_gpu_check_fails_the_reference():
    skipped = TestResult("On a GPU", "properties", 0, 0, "skipped", "Not counted here", "hidden", "test_gpu")
    passed = TestResult("a", "heads", 2, 2, "passed", "", "visible", "test_a")
    results = {"reference": SubmissionResult("reference", (passed, skipped))}
    assert assess(results, {}, {}, {})[0].ok
    verdict, = assess(results, {}, {}, {}, require_cuda=True)
    assert not verdict.ok and "skipped with CUDA required: test_gpu" in verdict.problem


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: make gpu-check runs for real there")
def test_the_gpu_check_fails_clearly_without_cuda():
    with pytest.raises(KitError, match="no CUDA device"):
        validate(require_cuda=True, emit=lambda line: None)
    done = subprocess.run(["make", "-s", "gpu-check"], cwd=paths.REPO_ROOT, capture_output=True, text=True,
                          timeout=300, env=None)
    assert done.returncode != 0 and "no CUDA device" in done.stderr, done.stdout + done.stderr


def test_grader_problems_are_counted_from_the_typed_failures():
    """Any grader-side failure fails a verdict; a crashed check only on correct code (a bug's data may crash a
    check). A note's words alone count for nothing."""
    from autograder.records.results import GraderFailure

    passed = TestResult("a", "heads", 2, 2, "passed", "", "visible", "test_a")
    crash = GraderFailure("check_crashed", "test_a: the check could not use this submission's answer (TypeError)")
    worded = SubmissionResult("reference", (passed,), notes=("grader problem: words only", "grading failed: too"))
    assert assess({"reference": worded}, {}, {}, {})[0].ok
    for failure in (GraderFailure("suite_problem", "could not collect"), crash):
        verdict, = assess({"reference": SubmissionResult("reference", (passed,), grader_failures=(failure,))},
                          {}, {}, {})
        assert not verdict.ok and failure.reason in verdict.problem
    result = SubmissionResult("bug", (_failed("test_scaling", "scores are divided by sqrt(d)"),),
                              grader_failures=(crash,))
    verdict, = assess({"bug": result}, {"bug": _bug(("sdpa-scaling",))}, {}, {"test_scaling": "sdpa-scaling"})
    assert verdict.ok


def test_a_bug_charged_to_more_than_two_concepts_is_wrong():
    topics = {"test_scaling": "sdpa-scaling", "test_mask": "sdpa-mask", "test_module": "mha-math"}
    result = SubmissionResult("bug", tuple(_failed(test_id, "scores are divided by sqrt(d)") for test_id in topics))
    verdict, = assess({"bug": result}, {"bug": _bug(("sdpa-scaling", "sdpa-mask", "mha-math"))}, {}, topics)
    assert not verdict.ok and "3 concepts" in verdict.problem
    two = SubmissionResult("bug", result.tests[:2])
    verdict, = assess({"bug": two}, {"bug": _bug(("sdpa-scaling", "sdpa-mask"))}, {}, topics)
    assert verdict.ok


def test_a_forbidden_api_that_names_nothing_is_flagged_by_validate():
    """A misspelt forbidden path would leave the real call unwatched (the worker skips what names nothing): the
    kit's lesson names only real calls, and a typo is caught by name."""
    contract = assignments.default().contract
    assert contract.forbidden and forbidden_naming_nothing(contract) == []
    typo = replace(contract, forbidden=(*contract.forbidden, "torch.nn.MultiHeadAttention", "torchh.linalg.norm"))
    assert forbidden_naming_nothing(typo) == ["torch.nn.MultiHeadAttention", "torchh.linalg.norm"]
