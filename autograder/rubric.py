"""How a hidden test declares its place in the rubric.

``@graded(points=3, concept="...")`` on a hidden test; the test module's
``GROUP`` names its gradebook column and the first docstring line is the
test's name in results and feedback. The concept is what a student reads when
the test fails: it names the idea, never the test's code or expected values.
"""

import pytest

from .results import VISIBILITIES


def graded(points, concept, visibility="visible", award_if_skipped=False):
    """Mark a hidden test with its points, the concept it checks and who may see it.

    ``award_if_skipped`` is for checks that cannot run on every grading machine
    (GPU parity): a skip then keeps the points, so a correct submission's total
    does not depend on the machine.
    """
    if visibility not in VISIBILITIES:
        raise ValueError(f"visibility must be one of {VISIBILITIES}, got {visibility!r}")
    if points < 0:
        raise ValueError("points must not be negative")
    return pytest.mark.graded(points=points, concept=concept, visibility=visibility,
                              award_if_skipped=award_if_skipped)


def rubric_entry(item):
    """``(id, name, group, points, concept, visibility, award_if_skipped)`` of a collected hidden test."""
    mark = item.get_closest_marker("graded")
    if mark is None:
        raise ValueError(f"hidden test {item.nodeid} has no @graded mark")
    doc = (item.function.__doc__ or item.name).strip().splitlines()[0].strip().rstrip(".")
    group = getattr(item.module, "GROUP", "other")
    return (item.name, doc, group, mark.kwargs["points"], mark.kwargs["concept"], mark.kwargs["visibility"],
            mark.kwargs["award_if_skipped"])
