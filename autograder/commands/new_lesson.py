"""``python -m autograder new-lesson ID --to DIR``: a working skeleton of a lesson, for an author to grow.

The skeleton is small but complete, so every command works on it from the first minute: one student file
(``center.py``, a function that centres each vector on its mean) with its reference between the solution
markers, its public test and ``conftest.py``, a hidden test module with two graded checks, a bug the grader
must catch and a correct variant it must accept. ``docs/authoring.md`` explains each piece; the author then
renames and rewrites them. Nothing of the kit's own lesson is copied.
"""

from __future__ import annotations

import keyword
from pathlib import Path

from ..errors import KitError

# Each file of the skeleton, relative to DIR; ``{id}`` and ``{ID}`` become the lesson's id (upper-cased for the
# public tests' environment variable). Only those two names are replaced, so the files may hold any braces.
SKELETON: dict[str, str] = {
    "assignment.toml": '''\
# The lesson as data: docs/authoring.md lists every key.
id = "{id}"
title = "Centring vectors"
solutions = "solutions/{id}"
release = "assignments/{id}"
hidden_tests = "hidden_tests"
catalogue = "catalogue"
packages = ["torch"]
forbidden = []
classes = []

[files]
center = ["center"]
''',
    "student_readme.md": '''\
# {title}

Write `center` in `assignments/{package}/center.py`.

{setup}## Check your work

```
.venv/bin/python -m pytest
```

The public tests take {seconds}.
''',
    "solutions/{id}/__init__.py": '''\
"""{id}: centring vectors on their mean."""

from .center import center

__all__ = ["center"]
''',
    "solutions/{id}/center.py": '''\
"""Centring: each vector minus its own mean."""

import torch


def center(x: torch.Tensor) -> torch.Tensor:
    """Each vector along the last dimension minus its mean: ``(..., d)`` -> ``(..., d)``."""
    ### BEGIN SOLUTION
    ### HINT: take the mean over the last dimension and keep that dimension for broadcasting
    return x - x.mean(dim=-1, keepdim=True)
    ### END SOLUTION
''',
    "solutions/{id}/tests/conftest.py": '''\
"""Lets ``import {id}`` find the package (``{ID}_PATH``: the folder holding another copy)."""

import os
import sys
from pathlib import Path

sys.path.insert(0, os.environ.get("{ID}_PATH") or str(Path(__file__).resolve().parents[2]))
''',
    "solutions/{id}/tests/test_center.py": '''\
import torch

from {id} import center


def test_centred_vectors_have_mean_zero():
    out = center(torch.tensor([[1.0, 2.0, 3.0], [4.0, 4.0, 7.0]]))
    assert torch.allclose(out.mean(-1), torch.zeros(2), atol=1e-6), "each vector minus its own mean has mean zero"
''',
    "hidden_tests/pytest.ini": '''\
[pytest]
python_files = check_*.py
python_functions = test_*
addopts = -p no:cacheprovider --import-mode=importlib
markers =
    graded(points, concept, visibility, optional, topic): rubric line of a hidden test
''',
    "hidden_tests/check_center.py": '''\
"""Hidden tests of center: each checks one idea against the trusted reference."""

import torch

from autograder.judge.rubric import WrongShape, graded

GROUP = "center"


@graded(2, "Centring subtracts each vector's own mean, taken along the last dimension.", topic="mean")
def test_center_matches_the_reference(student, reference):
    """center agrees with the reference on a batch of vectors"""
    x = torch.randn(4, 3, 5, generator=torch.Generator().manual_seed(1))
    out = student.center(x)
    if not isinstance(out, torch.Tensor) or out.shape != x.shape:
        raise WrongShape("center keeps the input's shape")
    assert torch.allclose(out, reference.center(x), atol=1e-6)


@graded(1, "A constant vector centres to zeros.", topic="mean", visibility="hidden")
def test_a_constant_vector_becomes_zeros(student):
    """center of a constant vector"""
    assert torch.allclose(student.center(torch.full((2, 4), 3.0)), torch.zeros(2, 4))
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
''',
}


def scaffold(lesson_id: str, destination: str | Path) -> list[Path]:
    """Write the skeleton lesson ``lesson_id`` into ``destination`` (new or empty); return the files written.
    Then ``release --assignment DIR`` writes its student package."""
    if not lesson_id.isidentifier() or keyword.iskeyword(lesson_id) or not lesson_id.islower():
        raise KitError(f"a lesson id is a lower-case Python package name, got {lesson_id!r}")
    destination = Path(destination)
    if destination.exists() and (not destination.is_dir() or any(destination.iterdir())):
        raise KitError(f"--to must be a new or empty folder: {destination}")
    written = []
    for name, text in SKELETON.items():
        path = destination / name.replace("{id}", lesson_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.replace("{id}", lesson_id).replace("{ID}", lesson_id.upper()), encoding="utf-8")
        written.append(path)
    return written
