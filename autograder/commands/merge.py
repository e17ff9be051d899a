"""``python -m autograder merge OUT_1 ... --out OUT``: one gradebook, report and nbgrader course from sharded runs.

The merged ``OUT/nbgrader`` is one relocatable course (no absolute paths) holding every student's executed
notebook and autograded scores, plus manual grades already given in a shard's course: grade the written answers
there in formgrader, then run ``python -m autograder final-gradebook OUT``.

Each shard's ``shard.json`` says which shard it is (``I`` of ``N``) and whom it graded. Merging refuses
shards that overlap, disagree on ``N``, or leave a shard missing; a record that is not the one ``shard.json``
lists at its path (a classmate's copied over it, a rename), and any other file in a shard's ``results/``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

from ..notebook import course_grades, nbgrader_record
from ..records import triage
from ..lesson.assignment import Assignment, resolve
from ..errors import KitError
from .planning import SHARD_FILE
from ..intake.naming import RESULTS, result_path
from ..records.record_files import grades_of_record, read_results, strays
from ..reports import write_reports
from ..records.results import MISPLACED, SubmissionResult


def _shard_info(folder: str | Path) -> tuple[int, int, list[str]]:
    path = Path(folder) / SHARD_FILE
    if not path.is_file():
        raise KitError(f"{folder} is not a shard's output (no {SHARD_FILE}: grade it with --shard I/N)")
    info = json.loads(path.read_text())
    return int(info["shard"]), int(info["of"]), list(info["students"])


def merge(folders: list[str | Path], out_dir: str | Path, emit: Callable[[str], None] = print,
          assignment: Assignment | None = None, allow_unisolated: bool = False) -> list[SubmissionResult]:
    """Check the shards fit together and that every record is a grade of record (sealed by this grader's key,
    graded in isolation, unless ``allow_unisolated`` accepts a ``--sandbox none`` run's), gather their results
    into ``out_dir`` and write the reports there (``assignment``: what was graded; the kit's lesson by
    default)."""
    lesson = resolve(assignment)
    if not folders:
        raise KitError("merge needs at least one shard folder")
    shards, owner = {}, {}
    for folder in folders:
        index, count, students = _shard_info(folder)
        if index in shards:
            raise KitError(f"shard {index} given twice: {shards[index][0]} and {folder}")
        shards[index] = (folder, count, students)
        for student in students:
            if student in owner:
                raise KitError(f"student {student!r} is in two shards: {owner[student]} and {folder}")
            owner[student] = folder
    counts = {count for _, count, _ in shards.values()}
    if len(counts) != 1:
        raise KitError(f"the shards were cut differently (N = {sorted(counts)})")
    count = counts.pop()
    missing = sorted(set(range(1, count + 1)) - set(shards))
    if missing:
        raise KitError(f"missing shard(s) {', '.join(map(str, missing))} of {count}")
    found = [entry for student, folder in sorted(owner.items()) for entry in read_results(folder, [student])]
    # The record at a student's path must be that student's: a classmate's sealed record copied over it would
    # list the classmate twice and the student nowhere.
    swapped = [f"{result_path(owner[student], student)} holds {result.student!a}'s record, not {student!a}'s"
               for student, result, _ in found if result is not None and result.student != student]
    if swapped:
        raise KitError(f"merge refused records its shard.json lists for another student: {'; '.join(swapped)}; "
                       "regrade those students with grade --resume")
    for folder, _, students in shards.values():  # one record per student, nothing beside them
        found += [(str(Path(folder) / RESULTS / name), None, MISPLACED) for name in strays(folder, students)]
    records = grades_of_record(found, "merge", allow_unisolated)
    out_dir = Path(out_dir)
    results, course = [], nbgrader_record.course_dir(out_dir)
    for result in records:
        student, folder = result.student, owner[result.student]
        source = result_path(folder, student)
        target = result_path(out_dir, student)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        results.append(result)
        if result.notebook is not None:
            nbgrader_record.copy_notebooks(nbgrader_record.course_dir(folder), course, result.notebook.id, lesson)
    # One course for the class, as if graded in one run: its scores from the records, then any manual grades
    # already given in a shard's own course.
    nbgrader_record.record(course, results, lesson)
    for folder in dict.fromkeys(owner.values()):
        ids = [r.notebook.id for r in results if owner[r.student] == folder and r.notebook is not None]
        if ids:
            nbgrader_record.copy_manual(nbgrader_record.course_dir(folder), course, ids, lesson)
    write_reports(results, out_dir)
    emit(f"merged {count} shards, {len(results)} students, into {out_dir}")
    # The whole class's, as one grade run would end; the written answers pending in the merged course (a shard's
    # manual grades included), not in the records as their shards wrote them.
    for line in triage.summary(course_grades.as_graded_now(results, out_dir, lesson)):
        emit(line)
    return results



