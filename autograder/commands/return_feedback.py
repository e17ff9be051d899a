"""``python -m autograder return-feedback OUT --class CLASS``: each student's feedback pushed to a branch of their
own repository (``feedback`` by default), as one commit holding ``FEEDBACK.md`` and ``FEEDBACK.txt``.

Only grades of record are returned (sealed records at their students' paths, as ``final-gradebook`` takes
them): anything else refuses the run, by name, before anything is pushed. Each student's class folder is found
as ``grade`` found it (the roster's folder, else the id); its clone's ``origin`` is read as data and used only in
a known safe form (:mod:`.feedback_git`). Nothing is written in the student's folder or clone: the branch arrives
on the remote, and the local clone sees it after ``git fetch``. The branch holds only the feedback (an orphan
commit, replaced on every return); a branch of that name the kit did not write (GitHub Classroom's feedback pull
request uses ``feedback``) is left alone and the student listed. A student who cannot be reached is listed with
the reason and the class goes on.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import feedback_git as gits
from .feedback_git import NotReturned
from .planning import discover
from ..errors import KitError
from ..intake.naming import safe_name
from ..lesson.assignment import Assignment, resolve
from ..records.record_files import read_results
from ..records.results import SubmissionResult, refuse_untrusted
from ..reports.escape import visible

FILES = {".md": "FEEDBACK.md", ".txt": "FEEDBACK.txt"}  # OUT/feedback/<name><suffix> -> the file on the branch
_BRANCH = re.compile(r"^(?!-)(?!.*\.\.)(?!.*//)[A-Za-z0-9._/-]{1,100}(?<![./])$")


@dataclass(frozen=True)
class Returned:
    """What happened to each student: ``returned`` ids, and ``{id: reason}`` for the others."""

    returned: tuple[str, ...]
    not_returned: dict[str, str]

    def summary(self) -> str:
        total = len(self.returned) + len(self.not_returned)
        line = f"returned to {len(self.returned)} of {total}"
        if self.not_returned:
            line += "; not returned: " + ", ".join(
                f"{visible(student)} ({reason})" for student, reason in sorted(self.not_returned.items()))
        return line


def folder_name(result: SubmissionResult) -> str:
    """The class folder graded for ``result``: the roster's match where the id does not name it."""
    return (result.handin.folder if result.handin is not None else "") or result.student


def _feedback(out_dir: Path, student: str) -> dict[str, bytes]:
    """The student's feedback files as they go on the branch (the Markdown one is required)."""
    files = {}
    for suffix, name in FILES.items():
        path = out_dir / "feedback" / f"{safe_name(student)}{suffix}"
        if path.is_file() and not path.is_symlink():
            files[name] = path.read_bytes()
    if FILES[".md"] not in files:
        raise NotReturned(f"no feedback/{safe_name(student)}.md (run final-gradebook to write it)")
    return files


def _locate(result: SubmissionResult, folders: dict[str, Path], out_dir: Path, class_dir: Path,
            scratch: Path) -> tuple[dict[str, bytes], str]:
    """One student's feedback files and checked remote URL (NotReturned: why not)."""
    if result.handin is not None and result.handin.absent:
        raise NotReturned("handed in nothing: no folder to find a repository in")
    folder = folders.get(folder_name(result))
    if folder is None:
        raise NotReturned(f"no class folder {visible(folder_name(result))!r} in {class_dir}")
    files = _feedback(out_dir, result.student)
    return files, gits.check_url(gits.origin_url(folder, scratch), untrusted=(class_dir, out_dir))


def _send(student: str, files: dict[str, bytes], url: str, scratch: Path, branch: str) -> str:
    """Push one student's feedback; what was done, in words (NotReturned: why not)."""
    tip = gits.remote_tip(scratch, url, branch)
    if tip and not gits.is_kit_commit(scratch, url, branch, tip):
        raise NotReturned(f"its branch {branch} holds commits the kit did not write (GitHub Classroom's feedback "
                          f"pull request uses a branch called feedback): left alone; choose another --branch")
    commit = gits.build_commit(scratch, files, f"Feedback on your submission ({visible(student)})")
    gits.push(scratch, url, commit, branch, tip)
    return f"pushed to {gits.shown(url)} branch {branch}"


def _shared(located: dict[str, tuple[dict[str, bytes], str]]) -> dict[str, str]:
    """``{student: reason}`` for students whose remotes name one repository: a clone's origin is the student's
    word, so one could send their feedback over a classmate's; neither is returned."""
    owners: dict[str, list[str]] = {}
    for student, (_, url) in located.items():
        owners.setdefault(gits.same_remote(url), []).append(student)
    return {student: "its remote is also that of " + ", ".join(visible(other) for other in group if other != student)
            + ": returned to none of them" for group in owners.values() if len(group) > 1 for student in group}


def return_feedback(out_dir: str | Path, class_dir: str | Path, branch: str = "feedback", dry_run: bool = False,
                    emit: Callable[[str], None] = print, assignment: Assignment | None = None,
                    allow_unisolated: bool = False) -> Returned:
    """Push every student's feedback of ``out_dir`` to ``branch`` of the ``origin`` of their clone in
    ``class_dir`` (``dry_run``: say where, push nothing). KitError, before anything is pushed, when a record is no
    grade of record (:func:`~autograder.records.results.refuse_untrusted`)."""
    out_dir, class_dir = Path(out_dir), Path(class_dir)
    if not _BRANCH.match(branch) or branch.endswith(".lock"):
        raise KitError(f"--branch {branch!r} is not a plain branch name (letters, digits, '.', '_', '-', '/')")
    found = read_results(out_dir)
    if not found:
        raise KitError(f"no results in {out_dir / 'results'}: run 'python -m autograder grade' first")
    refuse_untrusted([(label, problem) for label, _, problem in found], "return-feedback", allow_unisolated)
    results = sorted((record for _, record, _ in found if record is not None), key=lambda r: r.student)
    folders = {student: folder for student, folder in discover(class_dir, out_dir, resolve(assignment).contract)}
    pending = sum(1 for result in results if any(test.status == "pending" for test in result.tests))
    if pending:
        emit(f"note: {pending} student(s) have written answers not graded yet: their feedback says pending "
             f"(run final-gradebook first to include the grades)")
    returned, refused, located = [], {}, {}
    with tempfile.TemporaryDirectory(prefix="kit-feedback-") as scratch:
        gits.init_scratch(Path(scratch))
        for result in results:
            try:
                located[result.student] = _locate(result, folders, out_dir, class_dir, Path(scratch))
            except NotReturned as reason:
                refused[result.student] = str(reason)
        refused.update(_shared(located))
        for result in results:
            student = result.student
            try:
                if student in refused:
                    raise NotReturned(refused[student])
                files, url = located[student]
                done = (f"would push {', '.join(sorted(files))} to {gits.shown(url)} branch {branch}" if dry_run
                        else _send(student, files, url, Path(scratch), branch))
            except NotReturned as reason:
                refused[student] = str(reason)
                emit(f"  {visible(student)}: not returned: {reason}")
                continue
            returned.append(student)
            emit(f"  {visible(student)}: {done}")
    outcome = Returned(tuple(returned), refused)
    emit(("dry run: would have " if dry_run else "") + outcome.summary())
    return outcome
