"""nbgrader stays the notebook's system of record: its course folder, gradebook database and ``autograded/``.

The judge grades the notebook (:mod:`autograder.notebook.stage`); this module
writes what it decided where nbgrader's formgrader looks for it:

* ``OUT_DIR/nbgrader/nbgrader_config.py``: the course, with no absolute path
  (its root is the folder the file is in), so a merged or moved course still
  works; formgrader's HTML is sanitised (``HTMLExporter.sanitize_html``) and
  the executed notebooks carry the students' Markdown escaped; nbgrader's
  ``generate_feedback`` clears the grading notes (:mod:`autograder.notebook.grader_notes`);
* ``submitted/<student>/<assignment>/`` (the bytes handed in) and ``autograded/<student>/<assignment>/``
  (the executed notebook, written by the judge);
* ``gradebook.db``: the assignment's cells (as nbgrader's ``SaveCells`` records
  them from the release notebook), then per student the autograded scores and comments the
  way nbgrader's ``SaveAutoGrades`` records them (an answer unchanged from the
  release scores 0 with "No response."; a changed one needs manual grading).

After grading in formgrader, :func:`read_cells` reads manual scores and
comments back for the final gradebook and the regenerated feedback.
"""

from __future__ import annotations

import contextlib
import functools
import json
import shutil
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import grader_notes
from ..lesson.assignment import Assignment
from ..records.notebook_groups import NOTEBOOK, NOTEBOOK_GROUPS, WRITTEN
from ..records.results import SubmissionResult, write_atomic
from ..records.triage import printable

COURSE = "nbgrader"
CONFIG = """\
# Written by python -m autograder: an nbgrader course holding the notebook's grades. Relocatable: its root is
# this file's folder. Grade the written answers in formgrader, then run: python -m autograder final-gradebook OUT_DIR
import os

c = get_config()
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.course_id = {course_id!r}
c.HTMLExporter.sanitize_html = True  # formgrader shows students' work: no HTML or script of theirs runs
# Nothing goes through nbgrader's exchange; a folder of the course's own keeps formgrader from warning it is missing.
c.Exchange.root = os.path.join(c.CourseDirectory.root, "exchange")
"""


def _config(lesson):
    return CONFIG.replace("{course_id!r}", repr(lesson.id)) + grader_notes.FEEDBACK_CONFIG


def _api():
    """nbgrader's ``Gradebook`` and ``MissingEntry``. Imported without ``rfc3987_syntax``: jsonschema (through
    nbformat) loads it when it is installed and compiles some forty grammars for an IRI format check that nothing
    here uses, seconds of a grading run on a busy machine. Marked absent, jsonschema skips that check."""
    sys.modules.setdefault("rfc3987_syntax", None)
    from nbgrader.api import Gradebook, MissingEntry

    return Gradebook, MissingEntry


def warm() -> None:
    """Import nbgrader's database layer and read its schema's version now (see :func:`_api`), while the caller
    would be waiting anyway."""
    _api()
    _schema_head()


@contextlib.contextmanager
def _one_transaction(gradebook):
    """nbgrader's ``Gradebook`` commits after every change, and a commit expires every object the session loaded,
    so the next change loads them all again: hundreds of queries and a synced write per student. Inside this
    block its commits only flush (ids given, constraints checked, errors raised where they were), and the block
    commits once at its end, or rolls everything back: the course is written whole or not at all."""
    session, rollback, rolled_back = gradebook.db, gradebook.db.rollback, []

    def rolled(*args, **kwargs):  # nbgrader rolls back on a failed write: all of the block's writes so far
        rolled_back.append(True)
        return rollback(*args, **kwargs)

    session.commit, session.rollback = session.flush, rolled
    try:
        yield gradebook
    except BaseException:
        del session.commit, session.rollback
        session.rollback()
        raise
    del session.commit, session.rollback
    if rolled_back:  # a failed write was caught and the block went on: what is left is not the whole
        session.rollback()
        raise RuntimeError("a write to the nbgrader course failed and was rolled back; nothing was committed")
    session.commit()


def _notebook_id(lesson):
    """nbgrader's name for the notebook: its file name without ``.ipynb``."""
    return lesson.notebook.removesuffix(".ipynb")


# Characters formgrader's grading page would read as HTML: its template prints a student's names unescaped.
_HTML_SPECIAL = str.maketrans({"<": "\uff1c", ">": "\uff1e", "&": "\uff06", '"': "\uff02", "'": "\uff07"})


def student_names(student: str, nbid: str) -> dict[str, str]:
    """nbgrader's ``last_name`` and ``first_name`` for a student: the real id, then the course's id for it, so
    formgrader's "Show All Names" (which shows "last, first") reads ``Müller Anna, M_C3_BCller_20Anna``. The id is
    written as it is except for HTML's five special characters, shown as their full-width look-alikes
    (formgrader's grading page prints names unescaped); ``ids.csv`` keeps the exact id."""
    return {"last_name": printable(student).translate(_HTML_SPECIAL), "first_name": nbid}


def course_dir(out_dir: str | Path) -> Path:
    return Path(out_dir) / COURSE


def db_url(course: str | Path) -> str:
    return f"sqlite:///{Path(course).resolve() / 'gradebook.db'}"


def notebook_path(course: str | Path, kind: str, nbid: str, lesson: Assignment) -> Path:
    """``course/<kind>/<nbgrader id>/<assignment id>/<notebook>``."""
    return Path(course) / kind / nbid / lesson.id / lesson.notebook


def write_notebooks(course: str | Path, lesson: Assignment, nbid: str, submitted: bytes | None,
                    executed: dict | None) -> None:
    """Write the bytes handed in (when readable) and the executed notebook (nbformat node) for one student."""
    for kind, data in (("submitted", submitted), ("autograded", executed)):
        path = notebook_path(course, kind, nbid, lesson)
        if data is None:
            if path.exists():
                path.unlink()
            continue
        text = (data.decode("utf-8", "replace") if isinstance(data, bytes)
                else json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
        write_atomic(path, text)


def ensure_course(course: str | Path, lesson: Assignment) -> Path:
    """The course folder, its configuration and its database with the assignment's cells (made once)."""
    Gradebook, MissingEntry = _api()

    course = Path(course)
    course.mkdir(parents=True, exist_ok=True)
    config = course / "nbgrader_config.py"
    if not config.exists() or config.read_text() != _config(lesson):
        write_atomic(config, _config(lesson))
    (course / "exchange").mkdir(exist_ok=True)
    source = course / "source" / lesson.id / lesson.notebook
    if not source.exists():
        source.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(lesson.source_notebook(), source)
    _stamp(course / "gradebook.db")
    with Gradebook(db_url(course)) as gradebook, _one_transaction(gradebook):
        gradebook.update_or_create_assignment(lesson.id)
        try:
            gradebook.find_notebook(_notebook_id(lesson), lesson.id)
            return course
        except MissingEntry:
            pass
        # The cells, as nbgrader's SaveCells records them from the release notebook (without importing
        # nbconvert and nbformat, seconds of start-up on a busy machine).
        release = json.loads(lesson.released_notebook().read_text(encoding="utf-8"))
        gradebook.add_notebook(_notebook_id(lesson), lesson.id,
                               kernelspec=json.dumps(release.get("metadata", {}).get("kernelspec", {})))
        for cell in release["cells"]:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            grade_id, kind = meta.get("grade_id"), cell["cell_type"]
            where = (grade_id, _notebook_id(lesson), lesson.id)
            if meta.get("grade"):
                gradebook.update_or_create_grade_cell(*where, max_score=float(meta["points"]), cell_type=kind)
            if meta.get("solution"):
                gradebook.update_or_create_solution_cell(*where)
            if meta.get("task"):
                gradebook.update_or_create_task_cell(*where, max_score=float(meta["points"]), cell_type=kind)
            if meta.get("grade") or meta.get("solution") or meta.get("locked") or meta.get("task"):
                source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
                gradebook.update_or_create_source_cell(*where, cell_type=kind, locked=bool(meta.get("locked")),
                                                       source=source, checksum=meta.get("checksum"))
    return course


def _stamp(db):
    """A new database gets the alembic version nbgrader would give it, found in-process: nbgrader's own way runs
    the ``alembic`` command, a Python start-up per course."""
    import sqlite3

    if db.exists():
        return
    with contextlib.closing(sqlite3.connect(db)) as connection:
        connection.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
        connection.execute("INSERT INTO alembic_version (version_num) VALUES (?)", (_schema_head(),))
        connection.commit()


@functools.cache
def _schema_head() -> str:
    """The alembic version of nbgrader's schema (its migration scripts read: a few tenths of a second)."""
    from alembic.script import ScriptDirectory
    import nbgrader

    return ScriptDirectory(str(Path(nbgrader.__file__).parent / "alembic")).get_current_head()


def record(course: str | Path, results: list[SubmissionResult], lesson: Assignment) -> None:
    """Write the autograded notebook scores of ``results`` (SubmissionResults graded with the notebook) into the
    course database, as nbgrader's autograde would. A manual score given earlier is kept, and flagged for review."""
    Gradebook, MissingEntry = _api()

    graded = [result for result in results if result.notebook is not None]
    if not graded:
        return
    ensure_course(course, lesson)
    with Gradebook(db_url(course)) as gradebook, _one_transaction(gradebook), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not in session")  # nbgrader's add_submission, harmless
        for result in graded:
            nbid = result.notebook.id
            gradebook.update_or_create_student(nbid, **student_names(result.student, nbid))
            try:
                gradebook.find_submission(lesson.id, nbid)
            except MissingEntry:
                gradebook.add_submission(lesson.id, nbid)
            # The notebook's grades and comments read once (a query per cell cost a few ms a student).
            notebook = gradebook.find_submission_notebook(_notebook_id(lesson), lesson.id, nbid)
            grades = {grade.name: grade for grade in notebook.grades}
            comments = {comment.name: comment for comment in notebook.comments}
            with gradebook.db.no_autoflush:
                for test in result.tests:
                    kind, _, grade_id = test.id.partition("::")
                    if kind not in NOTEBOOK_GROUPS:
                        continue
                    if grade_id not in grades:
                        raise MissingEntry(f"no cell {grade_id} in the course's notebook")
                    grade = grades[grade_id]
                    grade.auto_score = None if test.status == "pending" else (
                        test.score if kind == NOTEBOOK else 0.0)
                    grade.needs_manual_grade = grade.manual_score is not None or grade.auto_score is None
                    if kind == WRITTEN:
                        comments[grade_id].auto_comment = None if test.status == "pending" else test.output


@dataclass(frozen=True)
class CellGrade:
    """One graded cell as the course database holds it now."""

    grade_id: str
    score: float  # nbgrader's: the manual score when there is one, else the automatic one
    max_score: float
    pending: bool  # needs a manual grade and has none
    manual: bool  # a grader gave it a score
    comment: str  # the grader's comment ("" when none)


def read_cells(course: str | Path, nbid: str, lesson: Assignment) -> dict[str, CellGrade]:
    """``{grade_id: CellGrade}`` of one student's notebook, or ``{}`` when the database has no submission."""
    Gradebook, MissingEntry = _api()

    if not (Path(course) / "gradebook.db").exists():
        return {}
    with Gradebook(db_url(course)) as gradebook:
        try:
            notebook = gradebook.find_submission_notebook(_notebook_id(lesson), lesson.id, nbid)
        except MissingEntry:
            return {}
        return cell_grades(notebook)


def cell_grades(notebook) -> dict[str, CellGrade]:
    """``{grade_id: CellGrade}`` of one of nbgrader's ``SubmittedNotebook`` (its session open)."""
    comments = {comment.name: comment.manual_comment or "" for comment in notebook.comments}
    return {grade.name: CellGrade(grade.name, float(grade.score or 0), float(grade.max_score),
                                  grade.manual_score is None and grade.auto_score is None,
                                  grade.manual_score is not None, comments.get(grade.name, ""))
            for grade in notebook.grades}


def copy_manual(source_course: str | Path, target_course: str | Path, nbids: list[str], lesson: Assignment
                ) -> None:
    """Copy manual scores, extra credit and grader comments of ``nbids`` from one course database to another
    (merging shards graded by hand before the merge)."""
    Gradebook, MissingEntry = _api()

    if not (Path(source_course) / "gradebook.db").exists():
        return
    with Gradebook(db_url(source_course)) as source, Gradebook(db_url(target_course)) as target:
        for nbid in nbids:
            try:
                notebook = source.find_submission_notebook(_notebook_id(lesson), lesson.id, nbid)
            except MissingEntry:
                continue
            for grade in notebook.grades:
                if grade.manual_score is None and grade.extra_credit is None:
                    continue
                try:
                    mine = target.find_grade(grade.name, _notebook_id(lesson), lesson.id, nbid)
                except MissingEntry:
                    continue
                mine.manual_score, mine.extra_credit = grade.manual_score, grade.extra_credit
                mine.needs_manual_grade = grade.needs_manual_grade
            for comment in notebook.comments:
                if comment.manual_comment:
                    try:
                        target.find_comment(comment.name, _notebook_id(lesson), lesson.id,
                                            nbid).manual_comment = comment.manual_comment
                    except MissingEntry:
                        continue
        target.db.commit()


def copy_notebooks(source_course: str | Path, target_course: str | Path, nbid: str, lesson: Assignment) -> None:
    """Copy one student's submitted and autograded notebooks between course folders."""
    for kind in ("submitted", "autograded"):
        source = notebook_path(source_course, kind, nbid, lesson)
        if source.is_file():
            target = notebook_path(target_course, kind, nbid, lesson)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)


def record_class(out_dir: str | Path, results: list, lesson: Assignment, emit: Callable[[str], None]) -> None:
    """Once the class is graded: the notebook scores of ``results`` (of ``lesson``'s notebook) into the course
    under ``out_dir`` (the system of record formgrader reads). A failure here is said, never raised: the grades
    stand in ``results/``."""
    try:
        record(course_dir(out_dir), results, lesson)
    except Exception as error:  # noqa: BLE001 - the records are written; only the course lags behind
        emit(f"WARNING: the nbgrader course could not be updated ({type(error).__name__}: {printable(error)})")
