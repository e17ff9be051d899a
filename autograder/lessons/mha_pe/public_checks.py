"""The helpers this lesson's public tests share (``solutions/mha_pe/tests/checks.py``: the instructor's copy,
never a student's), for the judge's side: the hidden tests, the bench and the kit's tests build
``torch.nn.MultiheadAttention`` twins with the same code the students' tests use."""

import functools
from pathlib import Path
from types import ModuleType

from autograder.lesson_api import load, load_module

LESSON = Path(__file__).resolve().parent


@functools.cache  # the hidden tests ask for it on every module check: read the descriptor once
def load_public_checks() -> ModuleType:
    """``tests/checks.py`` of the lesson's reference package, imported as ``<id>_public_checks``."""
    lesson = load(LESSON)
    return load_module(lesson.solutions / "tests" / "checks.py", f"{lesson.id}_public_checks")
