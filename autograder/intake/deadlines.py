"""Deadlines and the late policy: when each student's work was due (the class's deadline, or their extension),
until when late work is taken, and what lateness costs. Pure arithmetic on times; no clock is read, so a grade
never depends on when it was computed."""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from ..errors import KitError

DAY = 86400.0


def parse_time(text: str, what: str = "--deadline") -> datetime:
    """An ISO 8601 time with its offset (``2026-12-01T23:59:00+01:00`` or ``...Z``); KitError otherwise: a
    time without one would mean different moments on different machines."""
    try:
        moment = datetime.fromisoformat(str(text).strip().replace("Z", "+00:00"))
    except ValueError:
        raise KitError(f"{what}: not an ISO 8601 time, got {text!r} (e.g. 2026-12-01T23:59:00+00:00)") from None
    if moment.tzinfo is None:
        raise KitError(f"{what}: give the time zone too, got {text!r} (e.g. 2026-12-01T23:59:00+00:00)")
    return moment.astimezone(timezone.utc)


def iso(moment: datetime) -> str:
    """A time as the records keep it: UTC, to the second."""
    return moment.astimezone(timezone.utc).replace(microsecond=0).isoformat()


@dataclass(frozen=True)
class LatePolicy:
    """``per_day``: percent of the maximum taken off for each day, or part of a day, past the deadline (after
    ``grace_minutes``, which forgive a commit that late and no later); ``cap``: the most taken off, in percent;
    ``until``: how long after the deadline late work is taken (a later commit is not graded), in days."""

    per_day: float = 0.0
    cap: float = 100.0
    grace_minutes: float = 0.0
    until_days: float = 0.0

    def __post_init__(self) -> None:
        for name, value in (("--late-penalty", self.per_day), ("--late-cap", self.cap),
                            ("--grace", self.grace_minutes), ("--late-until", self.until_days)):
            if not math.isfinite(value) or value < 0:
                raise KitError(f"{name} must be a number at least 0, got {value}")
        if self.cap > 100:
            raise KitError(f"--late-cap is a percentage, at most 100, got {self.cap}")

    def days_late(self, committed: datetime, due: datetime) -> int:
        """Whole days late (a part of a day counts as one); 0 within the grace period."""
        seconds = (committed - due).total_seconds()
        if seconds <= self.grace_minutes * 60:
            return 0
        return math.ceil(seconds / DAY)

    def percent(self, days: int) -> float:
        return min(self.cap, self.per_day * days)


@dataclass(frozen=True)
class Deadlines:
    """The class's deadline, each student's own where they have an extension, and the late policy."""

    deadline: datetime
    extensions: dict[str, datetime] = field(default_factory=dict)
    policy: LatePolicy = LatePolicy()

    def due(self, student: str) -> datetime:
        return self.extensions.get(student, self.deadline)

    def last_accepted(self, student: str) -> datetime:
        """The latest commit time graded for ``student``: their deadline, plus the late window."""
        return self.due(student) + timedelta(days=self.policy.until_days)


def load_extensions(path: str | Path, deadline: datetime) -> dict[str, datetime]:
    """``{student: their deadline}`` from a CSV with a header: ``student`` and either ``deadline`` (an ISO time)
    or ``days`` (extra days after the class's deadline); KitError (one line) naming the bad row otherwise."""
    path = Path(path)
    try:
        text = path.read_text("utf-8-sig")
    except (OSError, UnicodeDecodeError) as error:
        raise KitError(f"--extensions {path}: cannot be read ({error})") from None
    rows = list(csv.DictReader(io.StringIO(text)))
    extensions = {}
    for number, row in enumerate(rows, start=2):
        row = {str(k).strip().casefold(): (v or "").strip() for k, v in row.items() if k is not None}
        student = row.get("student", "")
        if not student:
            raise KitError(f"--extensions {path}: line {number} names no student (columns: student, deadline or days)")
        if row.get("deadline"):
            extensions[student] = parse_time(row["deadline"], f"--extensions {path}, line {number}")
        elif row.get("days"):
            try:
                days = float(row["days"])
            except ValueError:
                raise KitError(f"--extensions {path}: line {number}: days must be a number, got {row['days']!r}") from None
            extensions[student] = deadline + timedelta(days=days)
        else:
            raise KitError(f"--extensions {path}: line {number} gives neither a deadline nor days")
    return extensions
