"""What needs a human, at a glance: a class with a missing file, a missing notebook and an odd id, graded once;
the console's summary, report.md's "Needs a look" and pending count, ids.csv, and Gradescope's view of pending
written answers all say the same, read from the records' typed fields (autograder/records/triage.py)."""

import csv
import json
import shutil
import time
from dataclasses import replace

import pytest

from autograder.records import triage
from autograder.commands.judge_loop import failed_result
from autograder.commands.grading import grade_class
from autograder.lesson.catalogue import copy_package
from autograder.notebook.nbgrader_record import student_names
from autograder.commands.planning import plan
from autograder.intake.naming import result_path
from autograder.reports.escape import markdown
from autograder.records.results import GraderFailure, NotebookSummary, SubmissionResult, TestResult, load_record, save
from autograder.sandbox.isolation import Sandbox
from autograder.intake.naming import nbgrader_safe_name, safe_name
from lesson import LESSON, MODULES, NOTEBOOK, SOLUTIONS

import rubric_totals

CELLS = rubric_totals.notebook()
MANUAL, ANSWERS = CELLS.manual, len(CELLS.written)
MISSING = "attention.py"
ODD = "Müller Anna"
CLASS = ("reference", "no-attention", "no-notebook", ODD)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The class, graded once with its notebooks: every student hands in the solved notebook (its written answers
    are changed from the release, so each waits for formgrader) except ``no-notebook``."""
    assert MISSING.removesuffix(".py") in MODULES
    root = tmp_path_factory.mktemp("needs-a-human")
    class_dir = root / "class"
    for student in CLASS:
        copy_package(SOLUTIONS, class_dir / student, MODULES)
        if student != "no-notebook":
            shutil.copyfile(LESSON.source_notebook(), class_dir / student / NOTEBOOK)
    (class_dir / "no-attention" / MISSING).unlink()
    said = []
    results = grade_class(class_dir, root / "out", jobs=2, emit=said.append)
    return {result.student: result for result in results}, root / "out", said


def section(text, heading):
    """The lines of a Markdown section, up to the next heading or picture."""
    body = text.split(f"## {heading}\n", 1)[1]
    lines = []
    for line in body.splitlines():
        if line.startswith(("## ", "![")):
            break
        lines.append(line)
    return [line for line in lines if line.strip()]


@pytest.mark.slow
def test_the_console_names_who_needs_a_look_and_why(graded):
    _, _, said = graded
    summary = said[said.index(next(line for line in said if line.startswith("graded "))) + 1:]
    assert summary[0] == f"needs a look: 2 of {len(CLASS)} student(s)", said
    named = {line.strip().split(":", 1)[0]: line for line in summary[1:] if line.startswith("  ")}
    assert set(named) == {"no-attention", "no-notebook"}, "the reference and the odd id need nobody"
    assert f"missing: {MISSING}" in named["no-attention"]
    assert "no notebook" in named["no-notebook"] and MISSING not in named["no-notebook"]


@pytest.mark.slow
def test_the_console_and_final_gradebook_count_the_written_answers_left(graded):
    results, out, said = graded
    pending = triage.ManualWork(3 * MANUAL, 3 * ANSWERS, 3)  # everyone who handed in the notebook
    assert triage.manual_work(results.values()) == pending
    line = triage.manual_line(pending)
    assert said[-1] == line and f"{3 * MANUAL:g} written points" in line and "from 3 student(s)" in line
    from autograder.commands.final_gradebook import export_final_gradebook

    printed = []
    export_final_gradebook(out, emit=printed.append)
    assert printed[-1] == line


@pytest.mark.slow
def test_the_report_lists_the_same_students_and_the_manual_work(graded):
    _, out, _ = graded
    report = (out / "report.md").read_text()
    looks = section(report, "Needs a look")
    assert [line.split("**")[1] for line in looks] == ["no-attention", "no-notebook"]
    assert f"missing: {markdown(MISSING)}" in looks[0] and "no notebook" in looks[1]
    assert triage.manual_line(triage.ManualWork(3 * MANUAL, 3 * ANSWERS, 3)) in report


@pytest.mark.slow
def test_the_report_shows_written_answers_as_graded_and_pending_never_as_a_pass_rate(graded):
    _, out, _ = graded
    report = (out / "report.md").read_text()
    rates = section(report, "Pass rate per test, hardest first")[2:]
    assert rates and not any("written" in row for row in rates)
    percentages = [int(row.rsplit("|", 2)[1].strip().rstrip("%")) for row in rates]
    assert percentages == sorted(percentages), "hardest first, as the guide says"
    written = section(report, "Written answers")[3:]
    assert len(written) == ANSWERS
    for row in written:
        _, name, graded_count, pending, _, _ = (cell.strip() for cell in row.split("|"))
        # the reference, no-attention and the odd id: pending; no-notebook's missing answers score 0 (graded)
        assert (graded_count, pending) == ("1", "3"), row


@pytest.mark.slow
def test_ids_csv_maps_an_odd_id_to_every_name_the_kit_made(graded):
    _, out, _ = graded
    with open(out / "ids.csv", newline="", encoding="utf-8") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    assert set(rows) == set(CLASS)
    odd = rows[ODD]
    assert odd["results"] == "results/M%C3%BCller Anna.json" and (out / odd["results"]).is_file()
    assert odd["feedback"] == f"feedback/{safe_name(ODD)}.md" and (out / odd["feedback"]).is_file()
    assert odd["nbgrader_id"] == nbgrader_safe_name(ODD) == "M_C3_BCller_20Anna"
    assert (out / "nbgrader" / "autograded" / odd["nbgrader_id"] / LESSON.id / NOTEBOOK).is_file()
    assert rows["no-notebook"]["nbgrader_id"] == nbgrader_safe_name("no-notebook")


@pytest.mark.slow
def test_formgraders_names_carry_the_real_id(graded):
    from nbgrader.api import Gradebook

    _, out, _ = graded
    with Gradebook(f"sqlite:///{out / 'nbgrader' / 'gradebook.db'}") as gradebook:
        student = gradebook.find_student(nbgrader_safe_name(ODD))
        assert (student.last_name, student.first_name) == (ODD, "M_C3_BCller_20Anna")
    # formgrader's grading page prints names unescaped: an id with HTML in it stays text there
    shown = student_names("<img src=x onerror=alert(1)>", "x")["last_name"]
    assert not set(shown) & set("<>&\"'") and "img src=x onerror=alert(1)" in shown


@pytest.mark.slow
def test_pending_written_answers_are_no_failed_tests_on_gradescope(graded):
    results, out, _ = graded
    data = json.loads(result_path(out, ODD).read_text())
    written = [test for test in data["tests"] if test["tags"] == ["written"]]
    assert len(written) == ANSWERS
    for test in written:
        assert "status" not in test and test["score"] == test["max_score"] == 0, test
        assert test["name"].endswith("(pending: graded by your instructor)")
    assert load_record(result_path(out, ODD)) == (results[ODD], ""), "the record reads back whole, its seal valid"
    assert results[ODD].max_score == rubric_totals.total(), "the record's maximum still counts the written points"


@pytest.mark.slow
def test_execution_time_is_the_students_whole_grading(graded):
    results, _, _ = graded
    result = results["reference"]
    assert result.execution_time > result.notebook.seconds > 0, "the notebook stage is part of the student's time"


def test_gradescope_run_reports_its_real_time_and_no_pending_failure(tmp_path):
    from autograder.commands import gradescope

    copy_package(SOLUTIONS, tmp_path / "submission", MODULES)
    shutil.copyfile(LESSON.source_notebook(), tmp_path / "submission" / NOTEBOOK)
    started = time.monotonic()
    gradescope.run(tmp_path, emit=lambda line: None)
    wall = time.monotonic() - started
    data = json.loads((tmp_path / "results" / "results.json").read_text())
    assert wall - 1.0 <= data["execution_time"] <= wall, "the run's wall time, start-up included"
    pending = [test for test in data["tests"] if test["extra_data"].get("pending")]
    assert len(pending) == ANSWERS and not any("status" in test or test["max_score"] for test in pending)
    assert not any(test.get("status") == "failed" for test in data["tests"])


def test_gradescope_shows_a_blank_written_answer_as_failed_as_every_deployment_does(tmp_path):
    """The released notebook, nothing written: each written answer is 0 of its points, failed, on Gradescope as
    in a local run (the same outcomes in every deployment), never pending: there is nothing to grade."""
    from autograder.commands import gradescope

    copy_package(SOLUTIONS, tmp_path / "submission", MODULES)
    shutil.copyfile(LESSON.released_notebook(), tmp_path / "submission" / NOTEBOOK)
    gradescope.run(tmp_path, emit=lambda line: None)
    data = json.loads((tmp_path / "results" / "results.json").read_text())
    written = [test for test in data["tests"] if test["tags"] == ["written"]]
    assert len(written) == ANSWERS and all(test.get("status") == "failed" and test["score"] == 0 < test["max_score"]
                                           and not test["extra_data"].get("pending") for test in written)


# ---------------------------------------------------------------- the triage alone, on records made by hand

def record(student="s", **fields):
    return SubmissionResult(student, (TestResult("a", "heads", 2, 2, "passed"),), **fields)


def test_triage_reads_typed_fields_never_a_notes_words():
    said_only = record("said", notes=("missing: attention.py; graded again after a grader failure",))
    busy = record("busy", grader_failures=(GraderFailure("machine_busy", "starved"),))
    crashed = record("crashed", grader_failures=(GraderFailure("check_crashed", "test_a: TypeError"),))
    kinds = {result.student: [reason.kind for reason in triage.reasons(result)] for result in (
        said_only, busy, crashed, record("retried", tries=3), record("loose", sandbox="none"),
        record("refused", intake_problems={"heads": "it is a symbolic link (links are not followed)"}),
        record("unread", notebook=NotebookSummary("unread", reason="the notebook is not valid JSON")),
        record("no-nb", notebook=NotebookSummary("no-nb", reason="no nb"), intake_problems={"notebook": "missing"}))}
    assert kinds == {"said": [], "busy": ["unfinished"], "crashed": ["check_crashed"], "retried": ["retried"],
                     "loose": ["unisolated"], "refused": ["files_refused"], "unread": ["notebook_unused"],
                     "no-nb": ["no_notebook"]}
    order = [item.student for item in triage.needs_a_look([record("z", tries=2), busy, record("a", tries=2)])]
    assert order == ["busy", "a", "z"], "most urgent first, then by id"


def test_the_summary_says_a_reason_everyone_shares_once_and_escapes_ids():
    loose = [record(name, sandbox="none") for name in ("a", "b", "c")]
    lines = triage.summary([*loose, record("\x1b[31mred", sandbox="none", tries=2)])
    assert lines[0] == f"every student: {triage.LABELS['unisolated']}"
    assert lines[1:] == ["needs a look: 1 of 4 student(s)",
                         "  \\x1b[31mred: graded again after a grader failure: 2 tries"]
    many = triage.summary([record("fine"), *(record(f"s{index}", tries=2) for index in range(3))], limit=2)
    assert many == ["needs a look: 3 of 4 student(s)", *(f"  s{index}: graded again after a grader failure: 2 tries"
                                                         for index in range(2)), "  ... and 1 more: see report.md"]
    assert triage.summary([record("fine")]) == ["needs a look: nobody of 1 student(s)"]


def test_resume_grades_again_a_record_whose_grading_did_not_finish(tmp_path):
    copy_package(SOLUTIONS, tmp_path / "class" / "ada", MODULES)
    students, out = [("ada", tmp_path / "class" / "ada")], tmp_path / "out"
    (task,), _ = plan(students, out, LESSON, notebook=False)
    sandbox = Sandbox("bwrap", "")
    save(failed_result(task, sandbox, GraderFailure("machine_busy", "starved")), result_path(out, "ada"))
    tasks, kept = plan(students, out, LESSON, resume=True, notebook=False)
    assert [task.student for task in tasks] == ["ada"] and kept == []
    save(replace(record("ada"), fingerprint=task.fingerprint), result_path(out, "ada"))
    tasks, kept = plan(students, out, LESSON, resume=True, notebook=False)
    assert tasks == [] and [result.student for result in kept] == ["ada"]
