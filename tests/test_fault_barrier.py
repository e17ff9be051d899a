"""One student's trouble stays that student's: a fault barrier per student, and valid text at every boundary.

A lone surrogate (``\\udc80``, which no UTF-8 encoder writes) in a student's exception message or a notebook's
print, or a folder whose name is not UTF-8, once stopped the whole class at the first record written (at
``--jobs 1``; at ``--jobs 2`` it killed its judge twice and regraded its classmates; on Gradescope no
results.json at all). Each attack here is graded beside classmates whose records must be exactly those of a run
without it; and a grader exception injected while one student's record or reports are written must become that
student's typed record (``record_failed``), listed under "Needs a look" and regraded by ``--resume``.
"""

import csv
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from autograder.commands import gradescope
from autograder.commands.grading import grade_class
from autograder.commands.planning import discover, shard_students
from autograder.intake.naming import folder_id, nbgrader_safe_name, result_path, safe_name
from autograder.lesson.catalogue import copy_package
from autograder.notebook.nbgrader_record import course_dir, notebook_path
from autograder.records import seal as seals
from autograder.records import triage
from autograder.records.results import SubmissionResult, TestResult, load, save, valid_result
from autograder.worker.text import NOTE as REPLACED
from lesson import LESSON, MODULES, NOTEBOOK, SOLUTIONS
from test_notebooks import SOLVED_CODE, hostile_notebook, student_notebook

RAISES_AT = "    if x.dim() != 4:\n"  # the first line of the reference's combine_heads
SURROGATE_MESSAGE = "bad \udc80 text"
PLAIN_MESSAGE = "bad ? text"  # the same length: the same line numbers, the same everything but the character
CLASSMATES = ("alice", "zed")


def raising(folder, message):
    """The reference, its ``combine_heads`` raising ``ValueError(message)`` first thing (the message as a Python
    literal: ``\\udc80`` stays an escape in the file, which is UTF-8)."""
    copy_package(SOLUTIONS, folder, MODULES)
    heads = Path(folder) / "heads.py"
    source = heads.read_text()
    assert source.count(RAISES_AT) == 1
    heads.write_text(source.replace(RAISES_AT, f"    raise ValueError({ascii(message)})\n{RAISES_AT}"))
    return folder


def outcomes(result):
    """Per test: what a student is graded and told (status, points, what happened, the typed cause)."""
    return {test.id: (test.status, test.score, test.max_score, test.happened, test.cause) for test in result.tests}


def grade(class_dir, out, jobs=1, **options):
    return {result.student: result for result in grade_class(class_dir, out, jobs=jobs, emit=lambda line: None,
                                                             **options)}


def assert_valid_record(path, result):
    """The record on disk: ASCII JSON, every text valid, and read back as the run returned it."""
    raw = Path(path).read_bytes()
    assert raw.isascii(), "records are written ASCII-only"
    text = raw.decode("ascii")
    assert "\\ud" not in text.lower(), "no surrogate escape in the record"
    assert load(path).to_json() == result.to_json(), "the record round-trips"


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    """The class without any attack: the classmates, and the same raising code with a plain message."""
    root = tmp_path_factory.mktemp("baseline")
    for student in CLASSMATES:
        copy_package(SOLUTIONS, root / "class" / student, MODULES)
    raising(root / "class" / "raises", PLAIN_MESSAGE)
    return grade(root / "class", root / "out", skip_notebook=True)


@pytest.mark.slow
@pytest.mark.parametrize("jobs", [1, 2])
def test_a_lone_surrogate_in_a_message_is_replaced_and_the_class_finishes(tmp_path, baseline, jobs):
    class_dir = tmp_path / "class"
    for student in CLASSMATES:
        copy_package(SOLUTIONS, class_dir / student, MODULES)
    raising(class_dir / "raises", SURROGATE_MESSAGE)
    results = grade(class_dir, tmp_path / "out", jobs=jobs, skip_notebook=True)

    assert sorted(results) == sorted(baseline)
    for student in CLASSMATES:
        assert outcomes(results[student]) == outcomes(baseline[student])
        assert results[student].grader_failures == () and results[student].tries == 1, "graded once, by one judge"
    result = results["raises"]
    assert result.grader_failures == () and result.tries == 1
    assert outcomes(result) == outcomes(baseline["raises"]), "graded as the same code with a plain message"
    failed = [test for test in result.tests if test.cause is not None and test.cause.kind == "raised"
              and test.cause.error_type == "ValueError"]
    assert failed, "the check failed as the student's own error"
    for test in failed:
        assert result.extra["student_messages"][test.id] == "ValueError: bad \ufffd text"
    assert REPLACED in result.notes
    assert REPLACED not in results["alice"].notes
    assert_valid_record(result_path(tmp_path / "out", "raises"), result)


@pytest.fixture(scope="module")
def gradescope_tree(tmp_path_factory):
    """The Gradescope zip unpacked as Gradescope does: ``/autograder/source``, simulated under a tmp folder."""
    root = tmp_path_factory.mktemp("gradescope")
    archive = gradescope.build_package(root / "autograder.zip")
    with zipfile.ZipFile(archive) as opened:
        opened.extractall(root / "autograder" / "source")
    for name in ("setup.sh", "run_autograder"):
        (root / "autograder" / "source" / name).chmod(0o755)
    (root / "autograder" / "results").mkdir()
    return root / "autograder"


@pytest.mark.slow
def test_run_autograder_grades_a_surrogate_message_and_writes_results_json(gradescope_tree, baseline):
    root = gradescope_tree
    raising(root / "submission", SURROGATE_MESSAGE)
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), AUTOGRADER_PYTHON=sys.executable)
    done = subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    path = root / "results" / "results.json"
    result = load(path)
    assert path.read_bytes().isascii()
    assert result.grader_failures == () and REPLACED in result.notes
    assert outcomes(result) == outcomes(baseline["raises"])


@pytest.mark.slow
def test_a_gradescope_run_whose_grading_raises_still_writes_a_failed_results_json(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("the grader's own bug")

    copy_package(SOLUTIONS, tmp_path / "submission", MODULES)
    monkeypatch.setattr(gradescope, "grade_class", broken)
    result = gradescope.run(tmp_path, emit=lambda line: None)
    written = json.loads((tmp_path / "results" / "results.json").read_text())
    assert written["score"] == 0 and written["tests"] == []
    assert [failure["kind"] for failure in written["extra_data"]["grader_failures"]] == ["grader_error"]
    assert result.grader_failures[0].reason.startswith("RuntimeError at ")
    assert "the grader's own bug" not in json.dumps(written), "an exception's message stays out of the record"


@pytest.mark.slow
def test_a_lone_surrogate_printed_by_a_notebook_costs_nothing(tmp_path):
    class_dir = tmp_path / "class"
    for student, apply_code in (("quiet", SOLVED_CODE["apply_code"]),
                                ("prints", f"print({ascii('x ' + chr(0xDC80) + ' y')})\n" + SOLVED_CODE["apply_code"]),
                                ("in-source", f"# a {chr(0xDC80)} in the cell's own text\n" + SOLVED_CODE["apply_code"])):
        copy_package(SOLUTIONS, class_dir / student, MODULES)
        hostile_notebook(class_dir / student / NOTEBOOK, apply_code)
    copy_package(SOLUTIONS, class_dir / "alice", MODULES)
    student_notebook(class_dir / "alice" / NOTEBOOK)
    results = grade(class_dir, tmp_path / "out")

    quiet = results["quiet"]
    assert any(test.group == "notebook" for test in quiet.tests) and quiet.score > 0
    assert not any(REPLACED in note for note in quiet.notes)
    for student in ("prints", "in-source"):  # the notebook's print; a lone surrogate escaped in the notebook's JSON
        result = results[student]
        assert result.grader_failures == () and result.unfinished is None
        assert outcomes(result) == outcomes(quiet), "the code's points and the notebook's, as without it"
        assert any(REPLACED in note for note in result.notes)
        assert_valid_record(result_path(tmp_path / "out", student), result)
    executed = notebook_path(course_dir(tmp_path / "out"), "autograded", nbgrader_safe_name("prints"), LESSON)
    assert "x \ufffd y" in executed.read_text(encoding="utf-8"), "the executed notebook formgrader shows"


@pytest.mark.slow
def test_a_folder_named_in_latin_1_is_graded_under_an_escaped_id(tmp_path):
    class_dir = tmp_path / "class"
    copy_package(SOLUTIONS, class_dir / "alice", MODULES)
    copy_package(SOLUTIONS, class_dir / "zed", MODULES)
    latin = Path(os.fsdecode(os.fsencode(class_dir) + b"/M\xfcller"))  # what unzip makes of "Müller"
    copy_package(SOLUTIONS, latin, MODULES)
    copy_package(SOLUTIONS, class_dir / "M%FCller", MODULES)  # real names an escape could have taken
    copy_package(SOLUTIONS, class_dir / "M\\xfcller", MODULES)
    escaped = "M/FCller"
    assert folder_id(latin.name) == escaped
    students = discover(class_dir)
    assert [student for student, _ in students] == sorted(["alice", "zed", escaped, "M%FCller", "M\\xfcller"])
    for by in ("hash", "index"):  # every shard sees the id; exactly one grades it
        shards = [[student for student, _ in shard_students(students, (index, 2), by)] for index in (1, 2)]
        assert sorted(shards[0] + shards[1]) == sorted(student for student, _ in students)

    results = grade(class_dir, tmp_path / "out", skip_notebook=True)
    assert sorted(results) == sorted(student for student, _ in students)
    full = outcomes(results["alice"])
    for student in results:
        assert outcomes(results[student]) == full and results[student].grader_failures == (), student
    note = [note for note in results[escaped].notes if "not UTF-8" in note]
    assert note == [f"the folder's name is not UTF-8 (b'M\\xfcller'): graded as '{escaped}', each byte that is "
                    "not UTF-8 spelled /XX"]
    assert_valid_record(result_path(tmp_path / "out", escaped), results[escaped])
    with open(tmp_path / "out" / "ids.csv", newline="", encoding="utf-8") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    assert rows[escaped]["results"] == f"results/{safe_name(escaped)}.json" == "results/M%2FFCller.json"
    assert (tmp_path / "out" / rows[escaped]["results"]).is_file()
    assert (tmp_path / "out" / rows[escaped]["feedback"]).is_file()


def test_a_record_that_still_holds_a_lone_surrogate_is_made_valid_before_it_is_written(tmp_path):
    """The last check (records.valid_result), for text that reached a record by a way no entry point covers."""
    bad = SubmissionResult("s", (TestResult("t", "g", 0, 2, "failed", output="out \udc80"),),
                           notes=("note \ud800",), extra={"student_output": "printed \udfff"})
    result = valid_result(bad)
    assert result.notes == ("note \ufffd", REPLACED) and result.tests[0].output == "out \ufffd"
    assert result.extra == {"student_output": "printed \ufffd"} and valid_result(result) is result
    save(result, tmp_path / "s.json")
    assert_valid_record(tmp_path / "s.json", result)


def test_an_escaped_id_is_one_no_other_folder_name_can_have():
    names = [b"M\xfcller", b"M\xfc\xfcller", b"M\xfcller\xff", b"\xfc", b"\xc3", b"\xed\xb2\x80", b"M\xc3\xbcller",
             b"M%FCller", b"M\\xfcller", b"M_FCller"]
    ids = [folder_id(os.fsdecode(name)) for name in names]
    assert ids == ["M/FCller", "M/FC/FCller", "M/FCller/FF", "/FC", "/C3", "/ED/B2/80", "M\u00fcller", "M%FCller",
                   "M\\xfcller", "M_FCller"]
    assert len({safe_name(student) for student in ids}) == len(ids), "and so are their files"


@pytest.mark.slow
@pytest.mark.parametrize("jobs", [1, 2])
def test_a_grader_exception_writing_one_student_becomes_their_record(tmp_path, monkeypatch, jobs):
    class_dir = tmp_path / "class"
    for student in ("alice", "unsaved", "unreported", "zed"):
        copy_package(SOLUTIONS, class_dir / student, MODULES)
    out = tmp_path / "out"
    seal = seals.seal

    def failing_seal(record, *args):  # inherited by forked judges: it fails where each judge writes the record
        if record["extra_data"]["student"] == "unsaved" and record["tests"]:
            raise RuntimeError("injected")
        return seal(record, *args)

    from autograder import reports
    write_student_reports = reports.write_student_reports

    def failing_reports(result, out_dir):  # in the process that writes each student's own reports
        if result.student == "unreported" and result.tests:
            raise RuntimeError("injected")
        return write_student_reports(result, out_dir)

    monkeypatch.setattr(seals, "seal", failing_seal)
    monkeypatch.setattr(reports, "write_student_reports", failing_reports)
    results = grade(class_dir, out, jobs=jobs, skip_notebook=True)

    assert sorted(results) == ["alice", "unreported", "unsaved", "zed"], "the class went on"
    full = outcomes(results["alice"])
    assert outcomes(results["zed"]) == full and results["zed"].grader_failures == ()
    for student, what in (("unsaved", "its record could not be written"),
                          ("unreported", "their reports could not be written")):
        for result in (results[student], load(result_path(out, student))):  # returned, and on disk
            assert [failure.kind for failure in result.grader_failures] == ["record_failed"]
            assert result.grader_failures[0].reason.startswith(f"{what}: RuntimeError at ")
            assert result.tests == () and result.unfinished == result.grader_failures[0]
    flagged = {item.student: item.reasons for item in triage.needs_a_look(results.values())}
    assert sorted(flagged) == ["unreported", "unsaved"]
    assert all([reason.kind for reason in flagged[student]] == ["unfinished"] for student in flagged)
    assert "unsaved" in (out / "report.md").read_text(encoding="utf-8").partition("Needs a look")[2]

    monkeypatch.undo()
    again = grade(class_dir, out, jobs=jobs, skip_notebook=True, resume=True)
    assert sorted(again) == ["alice", "unreported", "unsaved", "zed"]
    for student in again:
        assert outcomes(again[student]) == full and again[student].grader_failures == (), student
    assert round(again["alice"].execution_time, 3) == round(results["alice"].execution_time, 3), "kept, not regraded"
