"""What a ``grade`` run grades: the class's students, this shard's share of them, and which of them
``--resume`` keeps; plus where each result lives and what a shard says it graded."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..records import results as records
from ..records.record_files import read_results, strays
from ..intake import fingerprints, naming
from ..intake.stubs import notebook_unchanged, stub_files, unchanged
from ..records.handin import Elsewhere, Handin
from ..intake import submission as submissions
from ..lesson.assignment import Assignment
from ..errors import KitError
from ..worker.contract import Contract

SHARD_FILE = "shard.json"
SHARD_BY = ("index", "hash")
# Folders a class directory may hold that are not students (version control, editors, caches).
NOT_STUDENTS = {".git", ".github", ".ipynb_checkpoints", "__pycache__", ".hypothesis", ".pytest_cache", ".venv"}


@dataclass(frozen=True)
class Task:
    """One student to grade: id, folder, the fingerprint of (submission, grader), and what the grading
    process found about the hand-in (:class:`~autograder.records.handin.Handin`, as JSON), which the record
    keeps."""

    student: str
    folder: str
    fingerprint: str
    handin: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"student": self.student, "folder": self.folder, "fingerprint": self.fingerprint,
                "handin": self.handin}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Task:
        return cls(str(data["student"]), str(data["folder"]), str(data["fingerprint"]), data.get("handin"))


def _has_submission(folder: Path, contract: Contract) -> bool:
    """Whether a folder holds any of the student files (how a hidden folder still counts as a student)."""
    files, _ = submissions.read_files(folder, contract)
    return bool(files)


def _is_student(entry: Path, skip: Path | None, contract: Contract | None) -> bool:
    """Whether a class folder entry is a student: a folder, or a link (graded as refused, so it is seen), not the
    output folder, not a tool's folder; a hidden one only when it holds a submission."""
    try:
        if entry.name in NOT_STUDENTS or not (entry.is_symlink() or entry.is_dir()):
            return False
        if entry.is_symlink():
            return not entry.name.startswith(".")
        return entry.resolve() != skip and (not entry.name.startswith(".") or (
            contract is not None and _has_submission(entry, contract)))
    except OSError:  # unreadable: still a student, whose intake will say why
        return True


def discover(class_dir: str | Path, out_dir: str | Path | None = None, contract: Contract | None = None
             ) -> list[tuple[str, Path]]:
    """``[(student id, folder)]`` sorted by id; KitError for a missing or empty class folder.

    An output folder placed inside the class folder is not a student, nor is a hidden folder (a name starting
    with a dot, such as a tool's cache) unless it holds a submission (of ``contract``'s files). A student folder that is a symbolic link is
    listed: intake refuses it with a note, so it is graded 0 rather than silently skipped or followed. A folder
    whose name is not UTF-8 is graded under an escaped id (:func:`~autograder.intake.naming.folder_id`).
    """
    class_dir = Path(class_dir)
    skip = Path(out_dir).resolve() if out_dir else None
    if not class_dir.exists():
        raise KitError(f"class folder not found: {class_dir}")
    if not class_dir.is_dir():
        raise KitError(f"not a folder: {class_dir}")
    # A name that is not UTF-8 gets an id of valid text (naming.folder_id); intake still reads the folder itself.
    students = sorted((naming.folder_id(entry.name), entry) for entry in class_dir.iterdir()
                      if _is_student(entry, skip, contract))
    if not students:
        raise KitError(f"no student folders in {class_dir} (expected one folder per student)")
    return students




def without_clashes(students: list[tuple[str, Path]], emit: Callable[[str], None]) -> list[tuple[str, Path]]:
    """``students`` less those whose ids map to the same file name as another's (their outputs would overwrite
    each other's): refused, said, and the class goes on."""
    clashes = naming.colliding([student for student, _ in students])
    if clashes:
        emit(f"WARNING: not graded, their ids map to the same file name as another student's: "
             f"{', '.join(sorted(ascii(student) for student in clashes))}")
    return [(student, folder) for student, folder in students if student not in clashes]


def plan(students: list[tuple[str, Path]], out_dir: str | Path, assignment: Assignment, resume: bool = False,
         notebook: bool = True, emit: Callable[[str], None] | None = None, sandbox: str | None = None,
         handins: dict[str, Handin] | None = None, regrade: frozenset[str] = frozenset()
         ) -> tuple[list[Task], list[records.SubmissionResult]]:
    """``(tasks, kept)``: a Task per student to grade, and the results ``--resume`` keeps: those whose
    fingerprint, of the submission and what decides its grade, is unchanged since they were written, whose
    grading finished, and whose record is a grade of record (sealed by this grader, at the path the student's id
    gives and naming that student, graded in isolation) and, given ``sandbox`` (this run's mode), graded in that
    mode (a record of another mode is regraded: a grade must not depend on which sandbox a machine offered that
    day, so a run in one mode never keeps another's); anything else is regraded, and ``emit`` says whose. A
    file of ``results/`` that is no student's record here is left as it is (grade never reads it) and named, since
    ``final-gradebook`` will refuse it. ``handins``: what was found about each student's hand-in (roster,
    commit, lateness), completed here with what intake sees (stubs, other copies) and part of the fingerprint;
    ``regrade``: students graded again even when ``resume`` would keep them."""
    grader = fingerprints.grader_fingerprint(assignment.grading_inputs())
    notebook = notebook and assignment.notebook is not None
    stubs = stub_files(assignment.release, assignment.contract.modules)
    released = assignment.released_notebook()
    released_notebook = released.read_bytes() if notebook and released is not None and released.is_file() else None
    tasks, kept, distrusted, other_mode = [], [], [], []
    # The records --resume may keep, read as every command reads grades of record (each at its student's path).
    candidates = [student for student, _ in students if resume and student not in regrade
                  and naming.result_path(out_dir, student).exists()]
    previous_records = {student: (result, problem) for student, result, problem in read_results(out_dir, candidates)}
    for student, folder in students:
        intake = submissions.read_submission(folder, assignment.contract, assignment.notebook if notebook else None,
                                             stubs)
        files = dict(intake.files)
        if notebook:  # the notebook is part of what was graded
            files["notebook"] = intake.notebook if intake.notebook is not None else b"none"
        handin = replace((handins or {}).get(student) or Handin(), stubs=unchanged(intake.files, stubs),
                         layout=intake.layout, elsewhere=tuple(
                             Elsewhere(copy.path, copy.same, copy.stub, copy.newer) for copy in intake.elsewhere),
                         notebook_unchanged=notebook_unchanged(intake.notebook, released_notebook))
        # The hand-in decides the grade too (a late penalty): a record is kept only for the same one.
        handin_json = handin.to_json()
        files["handin"] = json.dumps(handin_json, sort_keys=True).encode()
        task = Task(student, str(folder), fingerprints.fingerprint(files, grader + ("+nb" if notebook else "")),
                    handin_json)
        if student in previous_records:
            previous, problem = previous_records[student]
            if problem:
                distrusted.append(student)
            # A record whose grading did not finish (the machine too busy, no worker) is no grade: graded again.
            elif sandbox is not None and previous is not None and previous.sandbox != sandbox:
                other_mode.append(student)
            elif previous is not None and previous.fingerprint == task.fingerprint and previous.unfinished is None:
                kept.append(previous)
                continue
        tasks.append(task)
    if distrusted and emit:
        emit(f"--resume: regrading {len(distrusted)} record(s) not sealed by this grader, not the student's own, or "
             f"graded without isolation: {', '.join(ascii(student) for student in distrusted)}")
    if other_mode and emit:
        emit(f"--resume: regrading {len(other_mode)} record(s) graded in another sandbox than this run's "
             f"({sandbox}): {', '.join(ascii(student) for student in other_mode)}")
    stray = strays(out_dir, [student for student, _ in students])
    if stray and emit:
        emit(f"WARNING: {Path(out_dir) / naming.RESULTS} holds files that are no record of this run's students, "
             f"which final-gradebook refuses (remove them): {', '.join(ascii(name) for name in stray)}")
    return tasks, kept


def parse_shard(text: str) -> tuple[int, int]:
    """``"I/N"`` -> ``(I, N)`` with 1 <= I <= N; KitError otherwise."""
    try:
        index, count = (int(part) for part in str(text).split("/"))
    except ValueError:
        raise KitError(f"--shard must look like I/N (for example 2/4), got {text!r}") from None
    if not 1 <= index <= count:
        raise KitError(f"--shard {text}: I must be between 1 and N")
    return index, count


def in_shard(student: str, shard: tuple[int, int]) -> bool:
    """Whether ``student`` belongs to shard ``(I, N)`` by a stable hash of the id, the same on every machine and
    however the class grows (for classes collected over time)."""
    index, count = shard
    return int(hashlib.sha256(student.encode("utf-8")).hexdigest(), 16) % count == index - 1


def shard_students(students: list[tuple[str, Path]], shard: tuple[int, int], by: str = "index"
                   ) -> list[tuple[str, Path]]:
    """The share of ``students`` (sorted ``(id, folder)`` pairs) that shard ``(I, N)`` grades: every N-th of the
    sorted list (``index``: shards differ in size by one at most; every shard must see the same class) or by
    :func:`in_shard` (``hash``)."""
    if by not in SHARD_BY:
        raise KitError(f"--shard-by must be one of {', '.join(SHARD_BY)}, got {by!r}")
    index, count = shard
    if by == "hash":
        return [(student, folder) for student, folder in students if in_shard(student, shard)]
    return [pair for position, pair in enumerate(students) if position % count == index - 1]


def write_shard_file(out_dir: str | Path, shard: tuple[int, int], students: list[str]) -> None:
    """``shard.json``: which shard this is and whom it graded (what ``merge`` checks the shards against)."""
    records.write_atomic(Path(out_dir) / SHARD_FILE, json.dumps({"shard": shard[0], "of": shard[1],
                                                                 "students": students}))

