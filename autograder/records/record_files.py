"""An output folder's ``results/`` as one record per student, read by the one loader every command uses
(:func:`read_results`: ``final-gradebook``, ``export``, ``merge`` and ``grade --resume``): every entry read at its
own path (``results.load_record``), and every entry that is not a student's record at the path its id gives named
by its file, so a copy, a rename or a file written beside a genuine record never hides behind the student it
claims. :func:`grades_of_record` is the refusal the commands that hand grades on share."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from ..errors import KitError
from ..intake.naming import RESULTS, result_path, safe_name
from .results import MISPLACED, SubmissionResult, load_record, refuse_untrusted

# (label, record or None, problem): the label is the student's id, or ``results/<file name>`` for an entry that
# is no student's record at its id's path; the problem says why it is no grade of record ("" when it is one).
Found = tuple[str, SubmissionResult | None, str]


def read_results(out_dir: str | Path, students: Iterable[str] | None = None) -> list[Found]:
    """:data:`Found` for every entry of ``out_dir/results``, by file name; a folder or anything else that is not
    a file is :data:`MISPLACED`. Given ``students``, the record at each one's path instead, labelled by that id
    (a missing or unreadable one: no record, ``FORGED``), in the order given; the other entries are left to
    :func:`strays`."""
    if students is not None:
        return [(student, *load_record(result_path(out_dir, student))) for student in students]
    folder = Path(out_dir) / RESULTS
    found = []
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        if path.is_file() or path.is_symlink():
            result, problem = load_record(path)
        else:
            result, problem = None, MISPLACED
        at_home = result is not None and problem != MISPLACED
        found.append((result.student if at_home else f"{RESULTS}/{path.name}", result, problem))
    return found


def grades_of_record(found: Sequence[Found], command: str, allow_unisolated: bool = False
                     ) -> list[SubmissionResult]:
    """The records of ``found`` sorted by id, once every entry is a grade of record (sealed by this grader, at its
    student's path, graded in isolation unless ``allow_unisolated``); else KitError naming each entry that is not,
    before ``command`` writes anything."""
    refuse_untrusted([(label, problem) for label, _, problem in found], command, allow_unisolated)
    return sorted((record for _, record, _ in found if record is not None), key=lambda result: result.student)


def class_grades(out_dir: str | Path, command: str, allow_unisolated: bool = False) -> list[SubmissionResult]:
    """Every record of ``out_dir`` as :func:`grades_of_record` takes them; KitError when there is none."""
    found = read_results(out_dir)
    if not found:
        raise KitError(f"no results in {Path(out_dir) / RESULTS}: run 'python -m autograder grade' first")
    return grades_of_record(found, command, allow_unisolated)


def strays(out_dir: str | Path, students: list[str]) -> list[str]:
    """The names of the entries of ``out_dir/results`` that are no record path of ``students`` (left by a
    student no longer graded there, or written by someone else), sorted."""
    folder = Path(out_dir) / RESULTS
    owned = {f"{safe_name(student)}.json" for student in students}
    return sorted(entry.name for entry in folder.iterdir() if entry.name not in owned) if folder.is_dir() else []
