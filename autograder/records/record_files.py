"""An output folder's ``results/`` as one record per student: every entry read at its own path
(``results.load_record``), and every entry that is not a student's record at the path its id gives named by its
file, so a copy, a rename or a file written beside a genuine record never hides behind the student it claims."""

from __future__ import annotations

from pathlib import Path

from ..intake.naming import RESULTS, safe_name
from .results import MISPLACED, SubmissionResult, load_record


def read_results(out_dir: str | Path) -> list[tuple[str, SubmissionResult | None, str]]:
    """``[(label, result, problem)]`` for every entry of ``out_dir/results``, by file name: ``label`` is the
    student's id for a record at its student's path, else ``results/<file name>`` (its ``problem`` then says
    why it is no grade of record); a folder or anything else that is not a file is :data:`MISPLACED`."""
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


def strays(out_dir: str | Path, students: list[str]) -> list[str]:
    """The names of the entries of ``out_dir/results`` that are no record path of ``students`` (left by a
    student no longer graded there, or written by someone else), sorted."""
    folder = Path(out_dir) / RESULTS
    owned = {f"{safe_name(student)}.json" for student in students}
    return sorted(entry.name for entry in folder.iterdir() if entry.name not in owned) if folder.is_dir() else []
