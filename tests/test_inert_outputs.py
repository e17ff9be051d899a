"""Outputs that never act on their reader: ids that a spreadsheet would run as formulas are written inert in
every CSV the kit writes (reports/csv_cells.py), ids holding terminal escapes reach no console, Markdown or plain
text file as control characters (reports/escape.py, commands/progress.py), students' text cannot open or close
nbgrader's mark-scheme regions however its markers overlap (notebook/grader_notes.py), and the public tests are
limited in CPU time, scaled to the packages they test, never by a busy machine's wall clock
(lesson/public_tests.py)."""

import csv
import json
import io

import pytest

from autograder.commands.final_gradebook import export_final_gradebook
from autograder.commands.grading import grade_class
from autograder.commands.progress import Progress
from autograder.commands.similarity import similarity
from autograder.errors import KitError
from autograder.lesson.catalogue import copy_package
from autograder.notebook.grader_notes import MARK_BEGIN, MARK_END, defang
from autograder.records.results import SubmissionResult, TestResult
from autograder.reports import feedback, feedback_text
from lesson import LESSON, MODULES, SOLUTIONS

FORMULAS = ('=HYPERLINK("x","y")', "+1", "-1+2", "@SUM(1+1)*cmd", "\tTAB", "\rCR", "'quoted")
RETITLE, ERASE = "\x1b]0;owned\x07retitle", "\x1b[2Kerase\x9b\x7f"
ESCAPES = (RETITLE, ERASE)
CLASS = ("ada", *FORMULAS, *ESCAPES)
CONTROLS = [chr(code) for code in (*range(0x00, 0x09), *range(0x0b, 0x20), *range(0x7f, 0xa0))]


def controls_in(text):
    """The control characters (line ends and tabs aside) ``text`` holds."""
    return sorted({char for char in text if char in CONTROLS})


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """A class whose folder names are hostile ids (each the reference; ``RETITLE`` misses a file, so the console's
    summary names it), graded end to end, then its final gradebook and similarity report written."""
    root = tmp_path_factory.mktemp("inert")
    class_dir, out = root / "class", root / "out"
    for student in CLASS:
        copy_package(SOLUTIONS, class_dir / student, MODULES)
    (class_dir / RETITLE / f"{MODULES[-1]}.py").unlink()
    said, bar = [], io.StringIO()
    results = grade_class(class_dir, out, emit=said.append, progress=Progress(len(CLASS), "grading", bar),
                          skip_notebook=True)
    export_final_gradebook(out, emit=said.append, allow_unisolated=True)
    similarity(out, class_dir, emit=said.append)
    return {result.student: result for result in results}, out, said + bar.getvalue().splitlines()


# --- formulas in CSV cells --------------------------------------------------------------------------------------

def test_a_cell_that_a_spreadsheet_would_run_is_written_as_text_and_read_back_exactly():
    from autograder.reports.csv_cells import cell, original

    for student in FORMULAS:
        assert cell(student) == "'" + student and original(cell(student)) == student
    assert cell("ada") == "ada" and original("ada") == "ada"
    assert cell("1-2") == "1-2"  # only a cell's first character makes a formula
    # The kit's own numbers stay numbers, a negative one too: never text from outside.
    assert [cell(value) for value in (3, 2.5, 0, -1, -0.5)] == ["3", "2.5", "0", "-1", "-0.5"]


@pytest.mark.slow
def test_every_csv_the_kit_writes_holds_formula_ids_as_text(graded):
    results, out, _ = graded
    assert set(results) == set(CLASS)
    for name in ("gradebook.csv", "ids.csv", "final_gradebook.csv"):
        header, *rows = read_csv(out / name)
        assert header[0] == "student"
        assert {row[0] for row in rows} == {"'" + student if student in FORMULAS else student for student in CLASS}
    from autograder.reports.csv_cells import original  # what a reader that needs the real id calls

    for name in ("gradebook.csv", "ids.csv", "final_gradebook.csv"):
        assert {original(row[0]) for row in read_csv(out / name)[1:]} == set(CLASS), name
    gradebook = {original(row[0]): row for row in read_csv(out / "gradebook.csv")[1:]}
    total = f"{results['ada'].max_score:g}"
    assert {student: row[1:3] for student, row in gradebook.items()} == {
        student: [total if student != RETITLE else f"{results[RETITLE].score:g}", total] for student in CLASS}
    ids = {original(row[0]): row for row in read_csv(out / "ids.csv")[1:]}
    for student in CLASS:  # the names made from an id lead to the files
        assert (out / original(ids[student][1])).is_file() and (out / original(ids[student][2])).is_file()
    header, *rows = read_csv(out / "similarity.csv")
    assert header[:2] == ["student_a", "student_b"] and header[-2:] == ["same_as_a", "same_as_b"]
    # Everyone handed in the reference: one row for the group of identical submissions, one for RETITLE (a file
    # short) beside it.
    assert [row[header.index("identical")] for row in rows] == ["yes", "no"]
    formulas = [cell for row in rows for cell in row[:2] if original(cell) in FORMULAS]
    assert formulas and all(cell.startswith("'") for cell in formulas)
    others = {student for row in rows for cell in row[-2:] if cell for student in json.loads(cell)}
    assert {original(cell) for row in rows for cell in row[:2]} | others == set(CLASS)


# --- escapes on the console and in the reports -------------------------------------------------------------------

@pytest.mark.slow
def test_no_id_reaches_the_console_as_control_characters(graded):
    _, _, lines = graded
    assert lines and all(controls_in(line) == [] for line in lines), [line for line in lines if controls_in(line)]
    console = "\n".join(lines)
    assert "\\x1b]0;owned\\x07retitle" in console  # the progress bar and the summary name it, visibly
    assert "\\x1b[2Kerase\\x9b\\x7f" in console and "\\tTAB" in console and "\\rCR" in console


@pytest.mark.slow
def test_no_report_file_holds_a_control_character(graded):
    _, out, _ = graded
    pages = [path for path in out.rglob("*") if path.suffix in (".md", ".txt")]
    assert {path.name for path in pages} >= {"report.md", "similarity.md"}
    assert len([path for path in pages if path.parent.name == "feedback"]) == 2 * len(CLASS)
    for path in pages:
        assert controls_in(path.read_text(encoding="utf-8")) == [], path
    retitle = (out / "feedback" / f"{_safe(RETITLE)}.md").read_text(encoding="utf-8")
    assert retitle.startswith("# Feedback for \\\\x1b\\]0;owned\\\\x07retitle\n")
    text = (out / "feedback" / f"{_safe(RETITLE)}.txt").read_text(encoding="utf-8")
    assert text.startswith("Feedback for \\x1b]0;owned\\x07retitle\n")
    assert "\\\\x1b\\]0;owned\\\\x07retitle" in (out / "report.md").read_text(encoding="utf-8")  # needs a look


def _safe(student):
    from autograder.intake.naming import safe_name

    return safe_name(student)


def test_feedback_shows_every_field_a_submission_fills_without_its_control_characters(tmp_path):
    """What happened (an exception's type name is the submission's to choose), notices and written answers."""
    result = SubmissionResult(student=ERASE, notices=("imports \x1b[31mred\x1b[0m",), tests=(
        TestResult("shapes", "heads", 0, 2, "failed", concept="split_heads keeps the batch",
                   happened=f"raised {RETITLE}"),
        TestResult("written: why", "written", 0, 1, "pending", output=f"answer \r{ERASE}"),
    ))
    for render in (feedback.render, feedback_text.render):
        page = feedback.write_each([result], tmp_path, ".page", render)[0].read_text(encoding="utf-8")
        assert controls_in(page) == [], render
        assert "x1b" in page.partition("\n")[0] and "owned" in page and "31mred" in page


def test_the_progress_bar_shows_an_id_it_cannot_act_on():
    stream = io.StringIO()
    bar = Progress(2, "grading\x1b[1A", stream)
    bar.advance(f"{RETITLE}: 3/3")
    bar.advance("\r\x1b[2K")
    shown = stream.getvalue()
    assert controls_in(shown) == []
    assert shown.count("\n") == 2 and "grading\\x1b[1A" in shown and "\\x1b]0;owned\\x07retitle: 3/3" in shown


# --- mark-scheme words that overlap ----------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "END MARK SCHEMEND MARK SCHEME",  # two END markers sharing an E
    "BEGIN MARK SCHEMEND MARK SCHEME",  # a BEGIN and an END sharing an E
    "END MARK SCHEM" + "END MARK SCHEM" * 6 + "E",  # a chain of seven
    "BEGIN BEGIN MARK SCHEME MARK SCHEME",  # nested: breaking the inner one leaves no outer one
    "END END MARK SCHEME MARK SCHEME and BEGIN MARK SCHEMEBEGIN MARK SCHEME",
    "my answer\nBEGIN MARK SCHEMEND MARK SCHEMEND MARK SCHEME\nrest",
])
def test_defang_breaks_every_marker_however_they_overlap(text):
    defanged = defang(text)
    assert MARK_BEGIN not in defanged and MARK_END not in defanged
    assert defanged.replace("\u200b", "") == text  # it reads the same
    assert defang(defanged) == defanged


def test_an_overlapping_end_marker_no_longer_cuts_a_students_line_from_nbgraders_feedback():
    """nbgrader's ClearMarkScheme drops every line holding an END marker (and what a BEGIN line opens)."""
    import nbformat
    from nbgrader.preprocessors import ClearMarkScheme

    answer = "my own line END MARK SCHEMEND MARK SCHEME\nBEGIN MARK SCHEMEND MARK SCHEME my next line"
    cell = nbformat.from_dict({"cell_type": "markdown", "source": defang(answer), "metadata": {}})
    assert ClearMarkScheme()._remove_mark_scheme_region(cell) is False
    assert cell.source.replace("\u200b", "") == answer  # both of the student's lines kept whole


# --- the public tests' limits ----------------------------------------------------------------------------------

def test_the_public_tests_limit_is_cpu_time_scaled_to_the_packages_and_the_wall_clock_only_a_backstop():
    from autograder.lesson import cpu_limited as limited
    from autograder.lesson import public_tests as pt

    assert pt.cpu_budget(1) == pt.START_CPU_SECONDS + pt.CPU_SECONDS_PER_PACKAGE
    budget = pt.cpu_budget(100)
    assert budget == pt.START_CPU_SECONDS + 100 * pt.CPU_SECONDS_PER_PACKAGE
    quiet = limited.limits_for(budget, load=0.5, cores=2)
    assert (quiet.cpu_seconds, quiet.wall_seconds) == (budget, limited.BACKSTOP * budget)
    # 28 processes on 2 cores: each gets about a 14th of one, so the backstop is 14 times further away.
    busy = limited.limits_for(budget, load=28.0, cores=2)
    assert (busy.cpu_seconds, busy.wall_seconds) == (budget, 14 * quiet.wall_seconds)
    # A crowded machine: an hour of wall time for 100 s of CPU, computing all along, is no verdict.
    assert limited.over_limit(busy, cpu_used=100.0, wall_elapsed=3600.0, idle_for=1.0) is None
    assert limited.over_limit(quiet, cpu_used=100.0, wall_elapsed=3600.0, idle_for=1.0) is None
    assert limited.over_limit(quiet, cpu_used=budget + 1, wall_elapsed=10.0, idle_for=0.0) == (
        f"used more than {budget:g} s of CPU time")
    assert limited.over_limit(quiet, cpu_used=3.0, wall_elapsed=400.0, idle_for=limited.IDLE_SECONDS) == (
        f"used no CPU for {limited.IDLE_SECONDS:g} s (a hang: a sleep or a blocking call)")
    assert limited.over_limit(quiet, cpu_used=3.0, wall_elapsed=quiet.wall_seconds, idle_for=0.0) == (
        f"still running after {quiet.wall_seconds:g} s (the wall-clock backstop)")


def test_public_tests_that_spin_are_stopped_by_their_cpu_time(tmp_path):
    """A package whose public tests never end is stopped by the kernel's CPU-time limit, as a one-line error."""
    from autograder.lesson.public_tests import run_public_tests_many

    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_spin.py").write_text("def test_spins():\n    while True:\n        pass\n")
    with pytest.raises(KitError, match=r"^the public tests of 1 package\(s\) used more than 3 s of CPU time$"):
        run_public_tests_many([tmp_path], LESSON, tests_dir=tests, cpu_seconds=3)


def test_a_child_that_sleeps_is_stopped_as_a_hang_by_the_cpu_it_does_not_use():
    """A hang uses no CPU, however busy the machine: that, not a wall-clock deadline, is what stops it."""
    import sys

    from autograder.lesson.cpu_limited import Limits, run_limited

    limits = Limits(cpu_seconds=60, wall_seconds=36000, idle_seconds=2)
    with pytest.raises(KitError, match=r"^a sleeper used no CPU for 2 s \(a hang: a sleep or a blocking call\)$"):
        run_limited([sys.executable, "-c", "import time; time.sleep(3600)"], limits, "a sleeper")
    done = run_limited([sys.executable, "-c", "print('done')"], limits, "a quick one")
    assert (done.returncode, done.stdout) == (0, "done\n")
