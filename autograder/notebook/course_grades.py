"""The notebook's grades as the course database holds them now: one definition for every command that reports them.

A record keeps the notebook's scores as ``grade`` (or the last ``final-gradebook``) wrote them; a TA grading in
formgrader changes only nbgrader's ``gradebook.db``. :func:`refresh` folds the database's current grades into a
record: ``final-gradebook`` saves what it returns, while ``grade`` and ``merge`` only count with it
(:func:`as_graded_now`), so their "written points await grading" line says what formgrader holds, not what the
records held when they were written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from . import nbgrader_record
from ..lesson.assignment import Assignment
from ..records.notebook_groups import NOTEBOOK_GROUPS, WRITTEN, pending_points
from ..records.results import SubmissionResult, TestResult
from ..records.triage import printable

# What a test graded in formgrader says: this line, then the grader's comment if there is one. The feedback
# (reports.feedback_view) tells a grader's comment by this prefix, so only this module writes it.
GRADED = "Graded by your instructor."
COMMENT = "\nGrader's comment: "


def graded_output(comment: str) -> str:
    """The output of a test graded by hand (``final-gradebook``): :data:`GRADED`, then the comment, if any."""
    return f"{GRADED}{COMMENT}{comment}" if comment else GRADED


def refreshed(test: TestResult, cell: nbgrader_record.CellGrade | None) -> TestResult:
    """One notebook TestResult as the course database has it now (``cell``: its CellGrade, or None)."""
    if cell is None:
        return test
    if cell.manual:
        status = "passed" if cell.score >= test.max_score else "failed"
        return replace(test, score=cell.score, status=status, output=graded_output(cell.comment))
    if test.group == WRITTEN and cell.pending:
        from .cells import WRITTEN_OUTPUT  # here: the reports import this module, and need nothing of the judge

        return replace(test, score=0, status="pending", output=WRITTEN_OUTPUT["pending"])
    return test


def refresh(result: SubmissionResult, course: str | Path, lesson: Assignment,
            cells: dict[str, nbgrader_record.CellGrade] | None = None) -> SubmissionResult:
    """``result`` with its notebook tests (of ``lesson``'s notebook) as graded in ``course`` so far (``cells``:
    its student's, when read already); ``result`` itself when it has no notebook or the database no submission
    of it."""
    if result.notebook is None:
        return result
    if cells is None:
        cells = nbgrader_record.read_cells(course, result.notebook.id, lesson)
    if not cells:
        return result
    tests = tuple(refreshed(test, cells.get(test.id.partition("::")[2])) if test.group in NOTEBOOK_GROUPS
                  else test for test in result.tests)
    return replace(result, tests=tests, notebook=replace(result.notebook, pending_manual=pending_points(tests)))


def read_class(course: str | Path, lesson: Assignment) -> dict[str, dict[str, nbgrader_record.CellGrade]]:
    """``{nbgrader id: {grade_id: CellGrade}}`` of every submission of ``lesson``'s notebook in ``course``, read
    in one session: opening nbgrader's ``Gradebook`` costs some 20 ms, a student at a time adds most of a minute
    to the end of a 2,000-student ``grade``."""
    if not (Path(course) / "gradebook.db").is_file():
        return {}
    Gradebook, _ = nbgrader_record._api()
    from nbgrader.api import Assignment as Assigned, Comment, Grade, Notebook, SubmittedAssignment, SubmittedNotebook
    from sqlalchemy.orm import joinedload, selectinload, undefer

    with Gradebook(nbgrader_record.db_url(course)) as gradebook:
        rows = (gradebook.db.query(SubmittedNotebook, SubmittedAssignment.student_id)
                .join(SubmittedAssignment, SubmittedAssignment.id == SubmittedNotebook.assignment_id)
                .join(Notebook, Notebook.id == SubmittedNotebook.notebook_id)
                .join(Assigned, Assigned.id == Notebook.assignment_id)
                .filter(Notebook.name == lesson.notebook.removesuffix(".ipynb"), Assigned.name == lesson.id)
                # A few queries for the whole class: each grade's cell and maximum, each comment's cell.
                .options(selectinload(SubmittedNotebook.grades).options(joinedload(Grade.cell),
                                                                        undefer(Grade.max_score)),
                         selectinload(SubmittedNotebook.comments).joinedload(Comment.cell)))
        return {nbid: nbgrader_record.cell_grades(notebook) for notebook, nbid in rows}


def refresh_class(results: list[SubmissionResult], course: str | Path, lesson: Assignment
                  ) -> list[SubmissionResult]:
    """Every one of ``results`` refreshed (:func:`refresh`) from one reading of ``course`` (:func:`read_class`)."""
    held = read_class(course, lesson)
    return [refresh(result, course, lesson, held.get(result.notebook.id, {})) if result.notebook is not None
            else result for result in results]


def as_graded_now(results: list[SubmissionResult], out_dir: str | Path, lesson: Assignment,
                  emit: Callable[[str], None] | None = None) -> list[SubmissionResult]:
    """``results`` as the course under ``out_dir`` holds them now, for counting (the pending written answers);
    nothing is saved. Where that course has no database, the records as they are. With ``emit``, a database that
    cannot be read is said in one line and the records are counted instead (``grade``'s last line must not undo
    a graded class); without it, the error is raised."""
    if not any(result.notebook is not None for result in results):
        return list(results)
    try:
        return refresh_class(results, nbgrader_record.course_dir(out_dir), lesson)
    except Exception as error:
        if emit is None:
            raise
        emit(f"WARNING: the nbgrader course could not be read ({type(error).__name__}: {printable(error)}); "
             "the written answers below are counted from the records")
        return list(results)
