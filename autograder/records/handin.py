"""What was handed in, as the grading machine found it: which folder and commit, whether it was late and what
that costs, and what about it needs a human (a folder not on the roster, a second folder for one student, the
stubs handed in unchanged, student files elsewhere in the folder). Part of each student's record
(``extra_data["handin"]``), written by the grading process from what it read, never by a worker."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

TEXT = 200  # characters kept of any name or path: a folder name is the student's choice
ITEMS = 20  # entries kept of any list


def _text(value: Any) -> str:
    return str(value)[:TEXT] if value is not None else ""


def _texts(value: Any) -> tuple[str, ...]:
    return tuple(_text(item) for item in value[:ITEMS]) if isinstance(value, list) else ()


@dataclass(frozen=True)
class Commit:
    """The commit graded: its hash, its committer time (ISO 8601, UTC), the deadline it was held to (the
    student's own, with any extension), how many later commits the branch holds (not graded) and whether the
    branch's commit times run backwards (a rewritten history: the times are the student's word)."""

    sha: str
    time: str
    deadline: str
    later: int = 0
    reordered: bool = False
    problem: str = ""  # why no commit was graded (not a clone, none by the deadline, unreadable), if none was

    def to_json(self) -> dict[str, Any]:
        return {"sha": self.sha, "time": self.time, "deadline": self.deadline, "later": self.later,
                "reordered": self.reordered, **({"problem": self.problem} if self.problem else {})}

    @classmethod
    def from_json(cls, data: Any) -> Commit | None:
        if not isinstance(data, dict):
            return None
        return cls(_text(data.get("sha"))[:64], _text(data.get("time")), _text(data.get("deadline")),
                   int(data.get("later", 0) or 0), bool(data.get("reordered", False)), _text(data.get("problem")))


@dataclass(frozen=True)
class Elsewhere:
    """A student file found outside the folder graded (see :class:`~autograder.intake.submission.Copy`)."""

    path: str
    same: bool
    stub: bool
    newer: bool

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "same": self.same, "stub": self.stub, "newer": self.newer}

    @classmethod
    def from_json(cls, data: Any) -> Elsewhere:
        data = data if isinstance(data, dict) else {}
        return cls(_text(data.get("path")), bool(data.get("same")), bool(data.get("stub")), bool(data.get("newer")))


@dataclass(frozen=True)
class Handin:
    """One student's hand-in. ``folder``: the class folder graded where it is not named by the id (a roster
    match); ``roster``: True on the roster, False not on it, None without a roster; ``absent``: on the roster
    with no folder (graded as an empty submission); ``also``: other folders that are this student's too, not
    graded; ``alike``: other students' ids that differ from this one only in case, spacing, a copy suffix or a
    look-alike letter; ``late_days`` and ``late_percent`` (of the maximum, taken off the score); ``stubs``: the
    modules handed in as released; ``layout``: the folder the files were read from; ``elsewhere``: student files
    found outside it; ``notebook_unchanged``: the notebook handed in as released."""

    folder: str = ""
    roster: bool | None = None
    absent: bool = False
    also: tuple[str, ...] = ()
    alike: tuple[str, ...] = ()
    commit: Commit | None = None
    late_days: int = 0
    late_percent: float = 0.0
    stubs: tuple[str, ...] = ()
    layout: str = "."
    elsewhere: tuple[Elsewhere, ...] = ()
    notebook_unchanged: bool = False  # the notebook handed in as released: no answer written

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"folder": self.folder, "roster": self.roster, "absent": self.absent,
                                "also": list(self.also), "alike": list(self.alike),
                                "late_days": self.late_days, "late_percent": self.late_percent,
                                "stubs": list(self.stubs), "layout": self.layout,
                                "elsewhere": [copy.to_json() for copy in self.elsewhere],
                                "notebook_unchanged": self.notebook_unchanged}
        if self.commit is not None:
            data["commit"] = self.commit.to_json()
        return data

    @classmethod
    def from_json(cls, data: Any) -> Handin | None:
        if not isinstance(data, dict):
            return None
        roster = data.get("roster")
        percent = float(data.get("late_percent", 0) or 0)
        return cls(folder=_text(data.get("folder")), roster=roster if isinstance(roster, bool) else None,
                   absent=bool(data.get("absent", False)), also=_texts(data.get("also")),
                   alike=_texts(data.get("alike")), commit=Commit.from_json(data.get("commit")),
                   late_days=max(0, int(data.get("late_days", 0) or 0)),
                   late_percent=min(100.0, max(0.0, percent)), stubs=_texts(data.get("stubs")),
                   layout=_text(data.get("layout", ".")),
                   elsewhere=tuple(Elsewhere.from_json(item) for item in (data.get("elsewhere") or [])[:ITEMS]
                                   if isinstance(data.get("elsewhere"), list)),
                   notebook_unchanged=bool(data.get("notebook_unchanged", False)))
