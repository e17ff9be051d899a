"""How a hidden test declares its place in the rubric.

``@graded(points=3, concept="...")`` on a hidden test; the test module's
``GROUP`` names its gradebook column and the first docstring line is the
test's name in results and feedback. The concept is what a student reads when
the test fails: it names the idea, never the test's code or expected values.
"""

import pytest

from .results import VISIBILITIES


def graded(points, concept, visibility="visible", optional=False, topic=None):
    """Mark a hidden test with its points, the concept it checks and who may see it.

    ``topic`` is a short key for that concept (``"pe-layout"``); catalogued bugs name the topics they break,
    which is how ``validate`` measures that a bug fails only the tests of its own concept. ``optional`` is for
    checks that cannot run on every grading machine (GPU parity): where such a check is skipped it counts
    neither in the score nor in the maximum, so no total depends on the machine's hardware.
    """
    if visibility not in VISIBILITIES:
        raise ValueError(f"visibility must be one of {VISIBILITIES}, got {visibility!r}")
    if points < 0:
        raise ValueError("points must not be negative")
    return pytest.mark.graded(points=points, concept=concept, visibility=visibility, optional=optional, topic=topic)


def rubric_entry(item):
    """``(id, name, group, points, concept, visibility, optional)`` of a collected hidden test."""
    mark = _mark(item)
    doc = (item.function.__doc__ or item.name).strip().splitlines()[0].strip().rstrip(".")
    group = getattr(item.module, "GROUP", "other")
    return (item.name, doc, group, mark.kwargs["points"], mark.kwargs["concept"], mark.kwargs["visibility"],
            mark.kwargs["optional"])


def rubric_topic(item):
    """The concept key of a collected hidden test (its function name when it names none)."""
    return _mark(item).kwargs.get("topic") or item.originalname


def _mark(item):
    mark = item.get_closest_marker("graded")
    if mark is None:
        raise ValueError(f"hidden test {item.nodeid} has no @graded mark")
    return mark
