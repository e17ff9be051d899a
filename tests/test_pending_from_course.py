"""The written points `grade --resume` and `merge` call pending are the course database's, not the records'.

A TA grades written answers in formgrader (nbgrader's gradebook.db) between grading runs; until final-gradebook
folds those grades into the records, only the database knows. The console's "Manual grading" line must count
what it holds, while grade --resume keeps the records it keeps byte for byte.
"""

import pytest
from autograder.commands.grading import grade_class
from autograder.commands.merge import merge
from autograder.intake.naming import result_path
from autograder.notebook import course_grades, nbgrader_record
from lesson import LESSON, NOTEBOOK

import rubric_totals
from test_notebooks import small_class

pytestmark = pytest.mark.slow  # grades a class, builds a venv or runs the demo

WRITTEN = rubric_totals.notebook().written  # {grade_id: points} of the written answers
FIRST, SECOND = sorted(WRITTEN)[:2]


def grade_one_answer(course, nbid, grade_id):
    """What a TA does in formgrader for one written answer: full points (through nbgrader's API)."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        grade = gradebook.find_grade(grade_id, NOTEBOOK.removesuffix(".ipynb"), LESSON.id, nbid)
        grade.manual_score, grade.needs_manual_grade = grade.max_score, False
        gradebook.db.commit()


def manual_line(points, answers, students):
    return (f"Manual grading: {points:g} written points ({answers} answers) from {students} student(s) await "
            "grading in formgrader.")


def manual_lines(said):
    return [line for line in said if line.startswith("Manual grading:")]


def test_resume_and_merge_count_the_written_answers_formgrader_still_holds(tmp_path):
    class_dir = small_class(tmp_path / "class")  # ada, bob, cy: every written answer typed, so pending
    shards = [tmp_path / "shard-1", tmp_path / "shard-2"]
    said = []
    first = grade_class(class_dir, shards[0], shard=(1, 2), emit=said.append)
    grade_class(class_dir, shards[1], shard=(2, 2), emit=lambda line: None)
    assert [result.student for result in first] == ["ada", "cy"]
    per_student = sum(WRITTEN.values())
    assert manual_lines(said) == [manual_line(2 * per_student, 2 * len(WRITTEN), 2)]

    # A TA grades one of ada's answers in the shard's course; the records still call it pending.
    grade_one_answer(shards[0] / "nbgrader", first[0].notebook.id, FIRST)
    records = {student: result_path(shards[0], student).read_bytes() for student in ("ada", "cy")}
    said = []
    kept = grade_class(class_dir, shards[0], shard=(1, 2), resume=True, emit=said.append)
    assert "--resume: 2 student(s) unchanged since their last grading, kept" in said
    assert manual_lines(said) == [manual_line(2 * per_student - WRITTEN[FIRST], 2 * len(WRITTEN) - 1, 2)]
    assert {student: result_path(shards[0], student).read_bytes() for student in ("ada", "cy")} == records
    assert [(r.student, r.score) for r in kept] == [(r.student, r.score) for r in first], "no score changed"

    # merge: the merged course carries the shard's manual grade, and its count says so.
    merged = tmp_path / "merged"
    said = []
    merge(shards, merged, emit=said.append)
    assert manual_lines(said) == [manual_line(3 * per_student - WRITTEN[FIRST], 3 * len(WRITTEN) - 1, 3)]

    # A TA grades one of bob's answers in the merged course; merging again counts it too.
    grade_one_answer(merged / "nbgrader", "bob", SECOND)
    said = []
    merge(shards, merged, emit=said.append)
    assert manual_lines(said) == [manual_line(3 * per_student - WRITTEN[FIRST] - WRITTEN[SECOND],
                                              3 * len(WRITTEN) - 2, 3)]
    # The class read in one session is what reading each student's cells gives.
    course = merged / "nbgrader"
    assert course_grades.read_class(course, LESSON) == {
        nbid: nbgrader_record.read_cells(course, nbid, LESSON) for nbid in ("ada", "bob", "cy")}


def test_export_refuses_grades_formgrader_holds_that_the_records_do_not(tmp_path):
    """A TA grades an answer after final-gradebook: the records are behind the course, and an export from them
    would lose that grade, so it is refused until final-gradebook runs again (then it goes through)."""
    import pytest

    from autograder.commands.export import export
    from autograder.commands.final_gradebook import export_final_gradebook
    from autograder.errors import KitError

    class_dir = small_class(tmp_path / "class")
    out = tmp_path / "graded"
    graded = grade_class(class_dir, out, emit=lambda line: None)
    export_final_gradebook(out)
    export(out, tmp_path / "before.csv", allow_pending=True)  # the records are the course's: fine
    grade_one_answer(out / "nbgrader", graded[0].notebook.id, FIRST)
    with pytest.raises(KitError, match="formgrader holds grades for 1 student"):
        export(out, tmp_path / "canvas.csv", allow_pending=True)
    assert not (tmp_path / "canvas.csv").exists()
    export_final_gradebook(out)
    rows = export(out, tmp_path / "canvas.csv", allow_pending=True).read_text().splitlines()
    before = (tmp_path / "before.csv").read_text().splitlines()
    assert [row.rsplit(",", 1)[1] for row in rows[2:]] == [
        f"{float(before[2].rsplit(',', 1)[1]) + WRITTEN[FIRST]:g}", *(row.rsplit(",", 1)[1] for row in before[3:])]
