"""``python -m autograder final-gradebook OUT_DIR`` (first named ``gradebook``): after grading the written
answers in formgrader, ``final_gradebook.csv`` and every student's feedback, regenerated.

Two gradebooks, told apart by name: ``gradebook.csv`` (``reports/gradebook.py``) is
written by every ``grade`` run, one column per test group, written answers
pending; ``final_gradebook.csv`` (``reports/final_gradebook.py``) comes after formgrader, code and
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

from ..intake.naming import result_path
from ..lesson.assignment import Assignment, resolve
from ..notebook import nbgrader_record
from ..notebook.course_grades import refresh_class
from ..records import triage
from ..records.record_files import class_grades
from ..records.results import save
from ..reports import final_gradebook, write_reports


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
    records = class_grades(out_dir, "final-gradebook", allow_unisolated)
    results = refresh_class(records, nbgrader_record.course_dir(out_dir), lesson)  # the database read once
    for result in results:
        save(result, result_path(out_dir, result.student))  # where load_record found it: nothing else is sealed
    write_reports(results, out_dir)
    [path] = final_gradebook.write(results, out_dir)
    if emit:
        emit(f"final gradebook: {path}; feedback regenerated for {len(results)} student(s)")
        emit(triage.manual_line(triage.manual_work(results)))  # the written answers formgrader still holds
    return path
