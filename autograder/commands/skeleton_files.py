"""The text of every file ``new-lesson`` writes (:mod:`.new_lesson`): a small lesson that shows each piece once.

``{id}`` and ``{ID}`` become the lesson's id (upper-cased for the public tests' environment variable); nothing
else is replaced, so the files may hold any braces. docs/authoring.md explains each piece.
"""

from __future__ import annotations

import json

NOTEBOOK = "check_your_understanding.ipynb"


def _cell(kind: str, grade_id: str, source: str, grade: bool = False, solution: bool = False,
          points: float | None = None) -> dict:
    """One notebook cell with nbgrader's metadata: ``grade`` (scored), ``solution`` (the student writes it),
    ``locked`` (neither: the student cannot change it), ``points`` for a scored cell."""
    meta = {"grade": grade, "grade_id": grade_id, "locked": not solution, "schema_version": 3,
            "solution": solution, "task": False}
    if points is not None:
        meta["points"] = points
    cell = {"cell_type": kind, "metadata": {"nbgrader": dict(sorted(meta.items()))},
            "source": source.splitlines(keepends=True)}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


# One autograded answer (a code cell the student writes, then a locked test cell with points) and one written
# answer (a Markdown cell with points, graded by hand in formgrader).
_NOTEBOOK = {
    "cells": [
        _cell("markdown", "intro", "# Check your understanding: centring vectors\n\nWrite your answers in the cells "
                                   "marked *YOUR CODE HERE* and *YOUR ANSWER HERE*. The code cell is checked "
                                   "automatically; the written answer is graded by your instructor.\n"),
        _cell("markdown", "q_by_hand", "## 1. Centre by hand\n\n*1 point, checked automatically.*\n\nSet `centred` "
                                       "to the scores below minus their mean, in the same order.\n"),
        _cell("code", "by_hand_code", "scores = [2.0, 4.0, 9.0]\n### BEGIN SOLUTION\n"
                                      "centred = [score - sum(scores) / len(scores) for score in scores]\n"
                                      "### END SOLUTION\n", solution=True),
        _cell("code", "by_hand_test", 'assert len(centred) == 3, "centred holds one value per score"\n'
                                      'assert abs(sum(centred)) < 1e-9, "centred values add up to zero"\n'
                                      "### BEGIN HIDDEN TESTS\n"
                                      "assert [round(value, 6) for value in centred] == [-3.0, -1.0, 4.0]\n"
                                      "### END HIDDEN TESTS\n", grade=True, points=1),
        _cell("markdown", "q_why_first", "## 2. Why centre first?\n\n*2 points, written: two or three "
                                         "sentences.*\n\n`standardize` divides by the spread only after "
                                         "`center`. Why would dividing first give a different answer?\n"),
        _cell("markdown", "a_why_first", "### BEGIN SOLUTION\n**Model answer.** The spread is measured around the "
                                         "mean; dividing the raw values scales the mean too, so the vector no "
                                         "longer has mean zero and unit spread.\n\n**Rubric.** 1 point: the spread "
                                         "is measured around the mean. 1 point: dividing first moves the mean.\n"
                                         "### END SOLUTION\n", grade=True, solution=True, points=2),
    ],
    "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                 "language_info": {"name": "python"}},
    "nbformat": 4,
    "nbformat_minor": 5,
}

SKELETON: dict[str, str] = {
    "assignment.toml": f'''\
# The lesson as data: docs/authoring.md lists every key.
id = "{{id}}"
title = "Centring vectors"
solutions = "solutions/{{id}}"
release = "assignments/{{id}}"
hidden_tests = "hidden_tests"
catalogue = "catalogue"
notebook = "{NOTEBOOK}"  # inside the solutions package, as released (docs/authoring.md, Notebook)
packages = ["torch"]
forbidden = []
classes = []

[files]
center = ["center", "standardize"]
''',
    "student_readme.md": '''\
# {title}

Write `center`, then `standardize` (built on `center`), in `assignments/{package}/center.py`, and answer the
questions in `{package}/check_your_understanding.ipynb`.

{setup}## Check your work

```
.venv/bin/python -m pytest
```

The public tests take {seconds}.
''',
    "solutions/{id}/__init__.py": '''\
"""{id}: centring vectors on their mean, then scaling them to unit spread."""

from .center import center, standardize

__all__ = ["center", "standardize"]
''',
    "solutions/{id}/center.py": '''\
"""Centring and standardizing: each vector minus its own mean, then divided by its own spread."""

import torch


def center(x: torch.Tensor) -> torch.Tensor:
    """Each vector along the last dimension minus its mean: ``(..., d)`` -> ``(..., d)``."""
    ### BEGIN SOLUTION
    ### HINT: take the mean over the last dimension and keep that dimension for broadcasting
    return x - x.mean(dim=-1, keepdim=True)
    ### END SOLUTION


def standardize(x: torch.Tensor) -> torch.Tensor:
    """``center(x)`` divided by each vector's root mean square after centring (its spread, dividing by d):
    every vector gets mean 0 and mean square 1. ``(..., d)`` -> ``(..., d)``."""
    ### BEGIN SOLUTION
    centred = center(x)
    return centred / centred.pow(2).mean(dim=-1, keepdim=True).sqrt()
    ### END SOLUTION
''',
    f"solutions/{{id}}/{NOTEBOOK}": json.dumps(_NOTEBOOK, indent=1) + "\n",
    "solutions/{id}/tests/conftest.py": '''\
"""Lets ``import {id}`` find the package (``{ID}_PATH``: the folder holding another copy)."""

import os
import sys
from pathlib import Path

sys.path.insert(0, os.environ.get("{ID}_PATH") or str(Path(__file__).resolve().parents[2]))
''',
    "solutions/{id}/tests/test_center.py": '''\
import torch

from {id} import center, standardize


def test_centred_vectors_have_mean_zero():
    out = center(torch.tensor([[1.0, 2.0, 3.0], [4.0, 4.0, 7.0]]))
    assert torch.allclose(out.mean(-1), torch.zeros(2), atol=1e-6), "each vector minus its own mean has mean zero"


def test_standardized_vectors_have_mean_square_one():
    out = standardize(torch.tensor([[1.0, 2.0, 3.0], [4.0, 4.0, 7.0]]))
    assert torch.allclose(out.pow(2).mean(-1), torch.ones(2), atol=1e-5), "spread measured dividing by d"
''',
    "hidden_tests/pytest.ini": '''\
[pytest]
python_files = check_*.py
python_functions = test_*
addopts = -p no:cacheprovider --import-mode=importlib
markers =
    graded(points, concept, visibility, optional, topic): rubric line of a hidden test
''',
    "hidden_tests/__init__.py": '''\
"""Makes ``from .parts import gates`` work in the check modules."""
''',
    "hidden_tests/parts.py": '''\
"""The gates the checks share: one probe per part other code builds on (docs/authoring.md, Gates)."""

import torch

from autograder.lesson_api import Gates


def _center_probe(student):
    """None when center works as the code built on it uses it; a wrong shape raises AssertionError."""
    x = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(7))
    out = student.center(x)
    assert isinstance(out, torch.Tensor) and out.shape == x.shape
    if not torch.allclose(out, x - x.mean(dim=-1, keepdim=True), atol=1e-6):
        return "mean", "does not subtract each vector's own mean yet (see its own checks)"
    return None


# gate name -> (the function it tries, the concept charged when it fails, its probe)
gates = Gates({"center": ("center", "mean", _center_probe)})
''',
    "hidden_tests/check_center.py": '''\
"""Hidden tests of center: each checks one idea against the trusted reference."""

import pytest
import torch

from autograder.lesson_api import WrongShape, graded

GROUP = "center"


@graded(2, "Centring subtracts each vector's own mean, taken along the last dimension.", topic="mean")
def test_center_matches_the_reference(student, reference):
    """center agrees with the reference on a batch of vectors"""
    x = torch.randn(4, 3, 5, generator=torch.Generator().manual_seed(1))
    out = student.center(x)
    if not isinstance(out, torch.Tensor) or out.shape != x.shape:
        raise WrongShape("center keeps the input's shape")
    assert torch.allclose(out, reference.center(x), atol=1e-6)


# Parametrized: the check earns its 0.5 points once per case (3 cases, 1.5 points in all).
@pytest.mark.parametrize("shape", [(5,), (2, 5), (2, 3, 5)], ids=lambda shape: "x".join(map(str, shape)))
@graded(0.5, "Centring works on any number of leading dimensions.", topic="mean")
def test_center_keeps_any_shape(student, reference, shape):
    """center on inputs of other ranks"""
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(2))
    assert torch.allclose(student.center(x), reference.center(x), atol=1e-6)


@graded(1, "A constant vector centres to zeros.", topic="mean", visibility="hidden")
def test_a_constant_vector_becomes_zeros(student):
    """center of a constant vector"""
    assert torch.allclose(student.center(torch.full((2, 4), 3.0)), torch.zeros(2, 4))
''',
    "hidden_tests/check_standardize.py": '''\
"""Hidden tests of standardize, which is built on center: a broken center is charged to center alone."""

import torch

from autograder.lesson_api import graded

from .parts import gates

GROUP = "standardize"


# When this check fails and center's gate fails too, it is not checked (NotChecked): charged to center's concept.
@graded(2, "Standardizing divides the centred vector by its spread, the root of its mean square.", topic="spread")
@gates.needs("center", own="standardize")
def test_standardize_matches_the_reference(student, reference):
    """standardize agrees with the reference"""
    x = torch.randn(4, 3, 6, generator=torch.Generator().manual_seed(3)) * 3 + 1
    assert torch.allclose(student.standardize(x), reference.standardize(x), atol=1e-5)
''',
    "catalogue/bugs.toml": '''\
# Realistic mistakes, each an edit of the reference: docs/authoring.md lists every key and validate's rules.
[[bug]]
id = "mean-over-the-wrong-dimension"
title = "the mean over the batch instead of over each vector"
concept = "own mean"
catches = ["test_center_matches_the_reference"]
topics = ["mean"]
demo = true
[[bug.edit]]
file = "center.py"
old = "return x - x.mean(dim=-1, keepdim=True)"
new = "return x - x.mean(dim=0, keepdim=True)"

[[bug]]
id = "mean-over-dimension-one"
title = "the mean over dimension 1: right for a batch of vectors, wrong for any other rank"
concept = "own mean"
catches = ["test_center_matches_the_reference"]
topics = ["mean"]
not_public = "the public test uses a batch of vectors only, where dimension 1 is the last"
[[bug.edit]]
file = "center.py"
old = "return x - x.mean(dim=-1, keepdim=True)"
new = "return x - x.mean(dim=1, keepdim=True)"

[[bug]]
id = "spread-divides-by-d-minus-one"
title = "the sample standard deviation (dividing by d - 1) as the spread"
concept = "spread"
catches = ["test_standardize_matches_the_reference"]
topics = ["spread"]
[[bug.edit]]
file = "center.py"
old = "return centred / centred.pow(2).mean(dim=-1, keepdim=True).sqrt()"
new = "return centred / centred.std(dim=-1, keepdim=True)"
''',
    "catalogue/variants.toml": '''\
# Correct code in other styles: each must keep every point.
[[variant]]
id = "sum-divided-by-length"
title = "the mean as the sum divided by the length"
[[variant.edit]]
file = "center.py"
old = "return x - x.mean(dim=-1, keepdim=True)"
new = "return x - x.sum(dim=-1, keepdim=True) / x.shape[-1]"

[[variant]]
id = "population-std"
title = "the spread as torch's standard deviation dividing by d"
[[variant.edit]]
file = "center.py"
old = "return centred / centred.pow(2).mean(dim=-1, keepdim=True).sqrt()"
new = "return centred / centred.std(dim=-1, keepdim=True, correction=0)"
''',
}
