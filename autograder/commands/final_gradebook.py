"""``python -m autograder final-gradebook OUT_DIR`` (first named ``gradebook``): after grading the written
answers in formgrader, ``final_gradebook.csv`` and every student's feedback, regenerated.

Two gradebooks, told apart by name: ``gradebook.csv`` (``reports/gradebook.py``) is
written by every ``grade`` run, one column per test group, written answers
pending; ``final_gradebook.csv`` (here) comes after formgrader, code and
notebook (autograded, manual) side by side, for the course's records.

The course folder is ``OUT_DIR/nbgrader``. Each student's record gets the
scores and comments nbgrader's database holds now (written answers, and any
autograded score a grader overrode), is saved again, and every report is
rewritten from the records: ``gradebook.csv``, ``feedback/``, ``report.md``,
and ``final_gradebook.csv``. The feedback is the kit's own, from the records: it
covers the code too, which nbgrader's ``generate_feedback`` (the notebook only) does not.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..notebook import nbgrader_record
from ..notebook.course_grades import refresh_class
from ..records import triage
from ..records.record_files import read_results
from ..intake.naming import result_path
from ..lesson.assignment import Assignment, resolve
from ..errors import KitError
from ..reports import csv_cells, write_reports
from ..records.results import SubmissionResult, refuse_untrusted, save, write_atomic

COLUMNS = ["student", "total", "max_total", "code", "max_code", "notebook_auto", "max_notebook_auto",
           "notebook_manual", "max_notebook_manual", "notebook_pending_manual", "late_penalty", "notebook_note"]


def _row(result: SubmissionResult) -> list[str | float]:
    def points(tests):
        return sum(t.score for t in tests), sum(t.max_score for t in tests)

    code = points([t for t in result.tests if t.group not in ("notebook", "written")])
    auto = points([t for t in result.tests if t.group == "notebook"])
    manual = points([t for t in result.tests if t.group == "written"])
    pending = sum(t.max_score for t in result.tests if t.status == "pending")
    # numbers written as numbers; total = the parts less the late penalty
    values = [result.score, result.max_score, *code, *auto, *manual, pending, result.penalty]
    return [result.student, *values, result.notebook.reason if result.notebook else ""]


def export_final_gradebook(out_dir: str | Path, emit: Callable[[str], None] | None = None,
                           assignment: Assignment | None = None, allow_unisolated: bool = False) -> Path:
    """Refresh every record from the course database, rewrite the reports and ``final_gradebook.csv``; return
    the path of the latter (``assignment``: what was graded; the kit's lesson by default). Every record must be
    a grade of record (sealed, at the path its student's id gives, graded in isolation; ``allow_unisolated``
    accepts a ``--sandbox none`` run's), and every file of ``results/`` such a record: anything else refuses the
    whole run, by file name, before a record is written. Each is sealed again once the manual grades are in."""
    lesson = resolve(assignment)
    out_dir = Path(out_dir)
    # Every entry, each checked at its own path and named by its file unless it is its student's record: a
    # record beside another of the same student is refused by name, never hidden behind the genuine one.
    found = read_results(out_dir)
    if not found:
        raise KitError(f"no results in {out_dir / 'results'}: run 'python -m autograder grade' first")
    course = nbgrader_record.course_dir(out_dir)
    refuse_untrusted([(label, problem) for label, _, problem in found], "final-gradebook", allow_unisolated)
    results = refresh_class([record for _, record, _ in found], course, lesson)  # the database read once
    for result in results:
        save(result, result_path(out_dir, result.student))  # where load_record found it: nothing else is sealed
    results.sort(key=lambda r: r.student)
    write_reports(results, out_dir)
    path = out_dir / "final_gradebook.csv"
    write_atomic(path, csv_cells.table(COLUMNS, (_row(result) for result in results)))  # ids, notes made inert
    if emit:
        emit(f"final gradebook: {path}; feedback regenerated for {len(results)} student(s)")
        emit(triage.manual_line(triage.manual_work(results)))  # the written answers formgrader still holds
    return path

