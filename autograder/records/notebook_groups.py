"""The notebook's two test groups, named once, and the one count of written points still to be graded.

A notebook's autograded checks are group :data:`NOTEBOOK`, its written answers group :data:`WRITTEN` (graded by
hand in formgrader); the same words prefix each such test's id (``notebook::<grade_id>``). Only a written answer
can be ``pending``, so :func:`pending_points` is the written points nobody has graded yet.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .results import TestResult

NOTEBOOK = "notebook"  # the notebook's autograded checks
WRITTEN = "written"  # the notebook's written answers, graded by hand in formgrader
NOTEBOOK_GROUPS = (NOTEBOOK, WRITTEN)


def pending_points(tests: Iterable[TestResult]) -> float:
    """The points of ``tests`` still to be graded by hand (written answers nobody has graded yet)."""
    return sum(test.max_score for test in tests if test.status == "pending")
