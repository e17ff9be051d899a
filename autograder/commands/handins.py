"""Whose folder is whose, and which commit counts: the step of ``grade`` between finding the class's folders
and planning their grading. With a roster, each folder is matched to a student (one graded per student, the
others named in their record), students with no folder are graded as empty submissions (0, "no submission"),
and folders matching nobody are graded and flagged; without one, ids that look alike are flagged. With a
deadline, each git clone is graded at its last commit at or before the student's deadline (or the end of the
late window), written to ``OUT/commits/<id>/`` for intake to read."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from ..intake import git_commit
from ..intake.deadlines import Deadlines, iso
from ..intake.naming import safe_name
from ..intake.roster import Roster, alike_groups, match
from ..intake.submission import Refused
from ..records.handin import Commit, Handin
from ..records.results import write_atomic

COMMITS = "commits"  # OUT's folder of the commits graded, one folder per student
EMPTY = "no-submission"  # OUT's empty folder, graded for a student on the roster who handed in nothing
RANK = {"exact": 0, "suffix": 1, "alike": 2}


def _by_roster(students: list[tuple[str, Path]], roster: Roster, empty: Path
               ) -> tuple[list[tuple[str, Path]], dict[str, Handin]]:
    matches = match([student for student, _ in students], roster)
    folders = dict(students)
    mine: dict[str, list] = {}
    for found in matches:
        mine.setdefault(found.student, []).append(found)
    graded, handins = [], {}
    for student, found in mine.items():
        if found[0].how == "unknown":  # on no roster: graded under the folder's own id, flagged
            graded.append((student, folders[found[0].folder_id]))
            handins[student] = Handin(roster=False)
            continue
        found.sort(key=lambda item: (RANK[item.how], item.folder_id))
        first = found[0]
        graded.append((student, folders[first.folder_id]))
        handins[student] = Handin(folder=first.folder_id if first.folder_id != student else "", roster=True,
                                  also=tuple(item.folder_id for item in found[1:]))
    for student in roster.ids:
        if student not in mine:
            graded.append((student, empty))
            handins[student] = Handin(roster=True, absent=True)
    return sorted(graded), handins


def _at_deadline(student: str, folder: Path, deadlines: Deadlines, out_dir: Path, handin: Handin
                 ) -> tuple[Path, Handin]:
    """The folder to grade for ``student`` under ``deadlines`` and the hand-in with its commit and lateness."""
    due = deadlines.due(student)
    if handin.absent:
        return folder, handin
    if not git_commit.is_clone(folder):
        return folder, replace(handin, commit=Commit("", "", iso(due), problem="not a git clone: graded as found"))
    target = out_dir / COMMITS / safe_name(student)
    if target.exists():
        shutil.rmtree(target)
    try:
        graded = git_commit.commit_at(folder, deadlines.last_accepted(student))
        if graded is None:
            target.mkdir(parents=True)
            return target, replace(handin, commit=Commit("", "", iso(due), problem="no commit at or before the "
                                                                                     "deadline: nothing graded"))
        git_commit.write_commit(folder, graded.sha, target)
    except Exception as error:  # noqa: BLE001 - one student's repository never stops the class
        # Refused and OSError say why in the kit's words; anything else is the grader's own error, named by type
        # (its message may quote the repository).
        why = str(error) if isinstance(error, (Refused, OSError)) else f"the grader's error ({type(error).__name__})"
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True, exist_ok=True)
        return target, replace(handin, commit=Commit("", "", iso(due), problem=f"the repository could not be read: "
                                                                                 f"{why}"))
    days = deadlines.policy.days_late(graded.time, due)
    commit = Commit(graded.sha, iso(graded.time), iso(due), later=graded.later, reordered=graded.reordered)
    return target, replace(handin, commit=commit, late_days=days, late_percent=deadlines.policy.percent(days))


def match_roster(students: list[tuple[str, Path]], out_dir: str | Path, roster: Roster | None,
                 emit: Callable[[str], None] = print) -> tuple[list[tuple[str, Path]], dict[str, Handin]]:
    """``(students to grade as (id, folder), {id: Handin})`` for the class's folders (sorted ``(id, folder)``):
    matched to ``roster`` where there is one, else each as found, ids that look alike flagged."""
    if roster is None:
        handins = {student: Handin() for student, _ in students}
        for student, others in alike_groups(student for student, _ in students).items():
            handins[student] = replace(handins[student], alike=others)
        return students, handins
    empty = Path(out_dir) / EMPTY
    empty.mkdir(parents=True, exist_ok=True)
    students, handins = _by_roster(students, roster, empty)
    absent = sum(1 for handin in handins.values() if handin.absent)
    unknown = sum(1 for handin in handins.values() if handin.roster is False)
    emit(f"roster: {len(roster.ids)} student(s); {absent} handed in nothing; {unknown} folder(s) match no one")
    return students, handins


def at_deadlines(students: list[tuple[str, Path]], handins: dict[str, Handin], out_dir: str | Path,
                 deadlines: Deadlines | None, emit: Callable[[str], None] = print
                 ) -> tuple[list[tuple[str, Path]], dict[str, Handin]]:
    """Each git clone of ``students`` replaced by its commit at the student's deadline (``None``: as found)."""
    if deadlines is None:
        return students, handins
    handins, timed = dict(handins), []
    for student, folder in students:
        folder, handins[student] = _at_deadline(student, folder, deadlines, Path(out_dir),
                                                handins.get(student) or Handin())
        timed.append((student, folder))
    late = sum(1 for student, _ in timed if handins[student].late_days)
    emit(f"deadline: {len(timed)} student(s) graded at their last commit by their deadline; {late} late")
    return timed, handins


OPTIONS_FILE = "handin-options.json"  # OUT's record of the hand-in options its last run was given
DEFAULTS = {"roster": None, "deadline": None, "extensions": None, "late_days": 0.0, "late_penalty": 0.0,
            "late_cap": 100.0, "grace": 0.0}


def remembered(out_dir: str | Path, given: dict, resume: bool, emit: Callable[[str], None] = print) -> dict:
    """The hand-in options to grade with: ``given`` (the command line's, keys of :data:`DEFAULTS`), or, for a
    ``--resume`` or ``--regrade`` run given none, those the last run into ``out_dir`` used, said in one line (a
    regrade without them would grade every clone's latest commit and regrade the class)."""
    path = Path(out_dir) / OPTIONS_FILE
    if not resume or any(given.get(name) != default for name, default in DEFAULTS.items()) or not path.is_file():
        return given
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError):
        return given
    options = {name: saved.get(name, default) for name, default in DEFAULTS.items()}
    used = ", ".join(f"--{name.replace('_', '-')} {value}" for name, value in options.items()
                     if value != DEFAULTS[name])
    emit(f"hand-in options of the last run into {out_dir}: {used}")
    return options


def remember(out_dir: str | Path, options: dict) -> None:
    """Keep ``options`` (paths made absolute) for the next ``--resume`` into ``out_dir``; nothing when default."""
    if all(options.get(name) == default for name, default in DEFAULTS.items()):
        return
    kept = {name: str(Path(options[name]).resolve()) if name in ("roster", "extensions") and options.get(name)
            else options.get(name, DEFAULTS[name]) for name in DEFAULTS}
    write_atomic(Path(out_dir) / OPTIONS_FILE, json.dumps(kept, indent=1, sort_keys=True))
