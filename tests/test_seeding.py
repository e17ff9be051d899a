"""Seeding: the same code graded twice, in fresh workers, gets the same
outcomes, down to weights a student's ``__init__`` draws at random and the gradient check's verdicts."""

import math

import pytest
import torch

from autograder.commands.grading import grade_class
from autograder.judge.grade import open_submission
from autograder.lessons.mha_pe.hidden_tests.support import AGREE_FLOOR, REACH_FLOOR, gradient_agrees, gradient_reaches
from autograder.lesson.catalogue import build, copy_package, load_catalogue
from autograder.sandbox.isolation import Limits
from lesson import CATALOGUE, LESSON, MODULES, SOLUTIONS

# Bugs whose verdicts once depended on the draw of the module's weights (the gradient check's keys), and bugs
# whose forward is its own (graded by finite differences).
BUGS = ("mha-scales-by-sqrt-d-model", "mha-keys-values-swapped", "sdpa-no-scaling", "mha-no-output-projection")

# A helper that draws from every generator a student may use.
DRAWS = '''
import torch as _torch
import random as _random
import numpy as _numpy


def split_heads(x, num_heads):
    return _torch.tensor([_random.random(), float(_numpy.random.rand()), float(_torch.rand(()))])
'''


def _draws(folder):
    """What a fresh worker's calls and modules draw: two calls of the helper, two modules' parameters."""
    with open_submission(folder, LESSON) as student:
        calls = [student.split_heads(torch.zeros(1, 1, 2), 1) for _ in range(2)]
        modules = [student.MultiHeadAttention(8, 2).tensors()["parameters"] for _ in range(2)]
    return calls, modules


def test_every_draw_is_the_same_in_every_fresh_worker(tmp_path):
    folder = copy_package(SOLUTIONS, tmp_path / "draws", MODULES)
    heads = folder / "heads.py"
    heads.write_text(heads.read_text() + DRAWS)
    first, second = _draws(folder), _draws(folder)
    (call, again), (module, other) = first
    assert torch.equal(call, again), "each call starts from the same random state"
    assert module.keys() == other.keys() and all(torch.equal(module[name], other[name]) for name in module)
    assert torch.equal(first[0][0], second[0][0])
    assert all(torch.equal(module[name], second[1][0][name]) for name in module), "weights differ between runs"


@pytest.mark.slow
def test_catalogued_bugs_grade_the_same_twice(tmp_path):
    bugs = {bug.id: bug for bug in load_catalogue(CATALOGUE / "bugs.toml", "bug")}
    class_dir = tmp_path / "class"
    for bug_id in BUGS:
        build(bugs[bug_id], class_dir / bug_id, LESSON)
    runs = []
    for run in ("first", "second"):
        results = grade_class(class_dir, tmp_path / run, jobs=1, limits=Limits(call_seconds=8.0),
                              emit=lambda line: None, skip_notebook=True)
        runs.append({result.student: [(test.id, test.status, test.score, test.output) for test in result.tests]
                     for result in results})
    assert set(runs[0]) == set(BUGS)
    assert runs[0] == runs[1]
    # The draw that once cost this bug the gradient check: its keys' gradient is small but real.
    gradients = dict((test_id, status) for test_id, status, _, _ in runs[0]["mha-scales-by-sqrt-d-model"])
    assert gradients["test_gradients_reach_every_projection"] == "passed"


@pytest.mark.parametrize("loss", [1e-6, 1.0, 4.5, 1e6])
def test_the_gradient_checks_thresholds_scale_with_the_loss(loss):
    """The verdicts are the same for a module and the same module scaled: only ratios to the loss count."""
    assert gradient_reaches(1e-4 * loss, loss) and gradient_reaches(-1e-4 * loss, loss)
    assert not gradient_reaches(0.0, loss)
    assert not gradient_reaches(0.5 * REACH_FLOOR * loss, loss)  # rounding of the loss, not a gradient
    assert gradient_agrees(1.005 * loss, loss, loss)
    assert gradient_agrees(0.5 * AGREE_FLOOR * loss, 0.0, loss)
    assert not gradient_agrees(1.1 * loss, loss, loss)
    assert not gradient_agrees(-1e-2 * loss, 1e-2 * loss, loss)  # the sign wrong


def test_the_gradient_check_fails_closed_on_values_that_are_not_numbers():
    assert not gradient_reaches(math.nan, 1.0) and not gradient_reaches(1.0, math.nan)
    assert not gradient_agrees(math.nan, 1.0, 1.0) and not gradient_agrees(1.0, 1.0, math.nan)
    assert not gradient_reaches(1.0, math.inf)
