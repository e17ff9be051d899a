"""How a hidden test declares its place in the rubric.

``@graded(points=3, concept="...")`` on a hidden test; the test module's
``GROUP`` names its gradebook column and the first docstring line is the
test's name in results and feedback. The concept is what a student reads when
the test fails: it names the idea, never the test's code or expected values.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import pytest

from ..records.results import VISIBILITIES, Visibility


@dataclass(frozen=True)
class RubricEntry:
    """One hidden test's line in the rubric, as its ``@graded`` mark and its module declare it."""

    id: str  # the test's name as collected (parametrized: with its parameters' id)
    name: str  # the first line of its docstring: its title in results and feedback
    group: str  # its module's GROUP: a gradebook column
    points: float
    concept: str  # what a student reads when it fails
    visibility: Visibility = "visible"
    optional: bool = False  # counted only where this machine can run it (GPU parity)
    topic: str = ""  # the concept's key (its function's name when the mark names none)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RubricEntry:
        return cls(id=str(data["id"]), name=str(data["name"]), group=str(data["group"]),
                   points=float(data["points"]), concept=str(data["concept"]),
                   visibility=data.get("visibility", "visible"), optional=bool(data.get("optional", False)),
                   topic=str(data.get("topic", "")))


class NotChecked(Exception):
    """Raised by a hidden test that cannot judge its own concept because a part it needs fails first.

    The test still fails (what was not checked is not earned, so breaking a part never buys another part's
    points), but it is charged to that part's concept (``topic``, a rubric topic key) rather than its own, and
    the feedback says which part to fix first: one mistake is named once, where it is. ``part`` and ``reason``
    are in the judge's words (student-visible): a function's name, "fails its own shape check".
    """

    def __init__(self, part: str, topic: str, reason: str) -> None:
        super().__init__(f"not checked: {part} {reason}")
        self.part, self.topic, self.reason = part, topic, reason


class Symptom(AssertionError):
    """A hidden test's failed assertion whose message says what the student's code did, in words safe to show:
    the judge's, naming no hidden input and no expected value ("returned float64 where float32 is expected",
    "moves the encoding the opposite way"). The feedback shows it as what happened; a plain ``assert``'s message is
    never shown."""


class WrongShape(Symptom):
    """A hidden test's assertion that the answer has the wrong shape (a failed check like any other, typed so the
    result's cause says ``wrong_shape`` rather than ``wrong_value``); its message, a :class:`Symptom`'s, says how
    the shape differs without its sizes (:func:`shape_symptom`)."""


def shape_symptom(got: tuple[int, ...], expected: tuple[int, ...], what: str = "a tensor") -> str:
    """How shape ``got`` differs from ``expected`` in words that give neither: the rank, or the first axis that
    is longer or shorter (for the first axis of a table: more or fewer rows than asked for)."""
    if len(got) != len(expected):
        return f"returned {what} with {len(got)} dimensions where {len(expected)} are expected"
    for axis, (have, want) in enumerate(zip(got, expected)):
        if have != want:
            size = "longer" if have > want else "shorter"
            return f"returned {what} whose dimension {axis} is {size} than it should be"
    return f"returned {what} of the expected shape"


def graded(points: float, concept: str, visibility: Visibility = "visible", optional: bool = False,
           topic: str | None = None) -> pytest.MarkDecorator:
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


def rubric_entry(item: pytest.Function) -> RubricEntry:
    """The rubric entry of a collected hidden test; ValueError when it carries no ``@graded`` mark."""
    mark = _mark(item)
    doc = (item.function.__doc__ or item.name).strip().splitlines()[0].strip().rstrip(".")
    group = getattr(item.module, "GROUP", "other")
    return RubricEntry(item.name, doc, group, mark.kwargs["points"], mark.kwargs["concept"], mark.kwargs["visibility"],
                       mark.kwargs["optional"], mark.kwargs.get("topic") or item.originalname)


def _mark(item: pytest.Function) -> pytest.Mark:
    mark = item.get_closest_marker("graded")
    if mark is None:
        raise ValueError(f"hidden test {item.nodeid} has no @graded mark")
    return mark
