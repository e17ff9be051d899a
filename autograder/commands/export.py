"""``python -m autograder export OUT --to FILE.csv [--format canvas|csv]``: the grades of record, for an LMS.

Reads the records as ``final-gradebook`` left them (the written answers folded in) and writes one of
:data:`~autograder.reports.lms_export.FORMATS`. Refused, naming why, before anything is written: a record that is
no grade of record (not sealed, away from its student's path, graded unisolated without ``--allow-unisolated``),
a student whose grading did not finish (a 0 there is the grader's failure, not a grade), and written answers not
graded yet unless ``--allow-pending`` (they would go to the LMS as 0).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..errors import KitError
from ..lesson.assignment import Assignment, resolve
from ..notebook.course_grades import as_graded_now
from ..records.record_files import class_grades
from ..records.results import SubmissionResult, write_atomic
from ..reports.escape import visible
from ..reports.lms_export import FORMATS, ExportContext


def exportable(out_dir: Path, allow_pending: bool, allow_unisolated: bool) -> list[SubmissionResult]:
    """Every record of ``out_dir``, sorted by id, once each is fit to leave the grading machine."""
    results = class_grades(out_dir, "export", allow_unisolated)
    unfinished = [result.student for result in results if result.unfinished is not None]
    if unfinished:
        raise KitError(f"export refused: grading did not finish for {len(unfinished)} student(s) "
                       f"({', '.join(visible(student) for student in unfinished)}): regrade them with grade --resume")
    pending = [result for result in results if any(test.status == "pending" for test in result.tests)]
    if pending and not allow_pending:
        raise KitError(f"export refused: {len(pending)} student(s) have written answers not graded yet: grade them "
                       f"in formgrader and run final-gradebook first (--allow-pending exports them as 0)")
    return results


def _marks(result: SubmissionResult) -> list[tuple[str, float, str]]:
    return [(test.id or test.name, test.score, test.status) for test in result.tests]


def export(out_dir: str | Path, to: str | Path, fmt: str = "canvas", column: str | None = None,
           allow_pending: bool = False, allow_unisolated: bool = False, emit: Callable[[str], None] | None = None,
           assignment: Assignment | None = None) -> Path:
    """Write ``out_dir``'s grades of record to ``to`` in format ``fmt``; the assignment's column is ``column``
    (default: the assignment's title). Return the path written."""
    if fmt not in FORMATS:
        raise KitError(f"unknown --format {fmt!r}: one of {', '.join(sorted(FORMATS))}")
    lesson = resolve(assignment)
    results = exportable(Path(out_dir), allow_pending, allow_unisolated)
    # The grades of record are what final-gradebook folded in: a grade entered in formgrader since would be lost.
    stale = [now.student for now, kept in zip(as_graded_now(results, out_dir, lesson), results)
             if _marks(now) != _marks(kept)]
    if stale:
        raise KitError(f"export refused: formgrader holds grades for {len(stale)} student(s) that their records do "
                       f"not have yet: run final-gradebook first")
    name = column or lesson.title
    path = Path(to)
    write_atomic(path, FORMATS[fmt](results, ExportContext(column=name)))
    if emit:
        emit(f"{fmt} export: {path} ({len(results)} student(s), column {name!r})")
    return path
