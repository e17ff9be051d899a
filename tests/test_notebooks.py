"""The Check Your Understanding notebook through the real nbgrader: release, autograde, manual grades, export."""

import csv
import html
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

import pytest

from autograder.notebook import nbgrader_tools
from autograder import paths
from autograder.commands.final_gradebook import export_final_gradebook
from autograder.commands.grading import grade_class
from autograder.intake.naming import result_path
from autograder.lesson.catalogue import copy_package
from autograder.records.results import load
from autograder.sandbox.isolation import Limits
from autograder.intake.naming import safe_name
from lesson import LESSON, MODULES, NOTEBOOK, SOLUTIONS

import rubric_totals

CELLS = rubric_totals.notebook()  # the source notebook's graded cells and their points
AUTO, MANUAL = CELLS.auto, CELLS.manual
CODE_MAX = rubric_totals.code_max()  # the GPU check counts only where this machine has CUDA
TOTAL = rubric_totals.total()

RELEASED = LESSON.released_notebook()
WAVES = ("angles = torch.arange(1001.0)[:, None] * 10000 ** (-torch.arange(0, 64, 2) / 64)\n"
         "waves = torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(1)\n")
SOLVED_CODE = {
    "understand_code": f"raw_share = 1000 / 1001\n{WAVES}largest_wave_value = waves.abs().max().item()\n",
    "apply_code": "def head_dim(d_model, num_heads):\n    return d_model // num_heads\n\n\nanswer = head_dim(64, 8)\n",
}


def student_notebook(path, answered=True, drop=()):
    """The released notebook as a student would hand it in: code answered, written answers typed, cells dropped."""
    notebook = json.loads(RELEASED.read_text())
    kept = []
    for cell in notebook["cells"]:
        grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if grade_id in drop:
            continue
        if answered and grade_id in SOLVED_CODE:
            cell["source"] = SOLVED_CODE[grade_id]
        elif answered and cell["cell_type"] == "markdown" and cell["metadata"].get("nbgrader", {}).get("solution"):
            cell["source"] = "Permuting the input permutes the output; attention cannot see order."
        kept.append(cell)
    notebook["cells"] = kept
    path.write_text(json.dumps(notebook))
    return path


PROBE = """import socket
try:  # what a notebook could send home, or to a service on the grading machine
    socket.create_connection(("127.0.0.1", {port}), timeout=3).sendall(b"reached the host")
except OSError:
    pass
"""
# One hostile notebook per attack: each replaces the apply_code cell (and the understand answer where said).
EQ_ALWAYS_TRUE = """class Anything:
    def __eq__(self, other):
        return True
    __lt__ = __le__ = __gt__ = __ge__ = __eq__
    def __abs__(self):
        return self
    def __sub__(self, other):
        return self
    __rsub__ = __sub__
    __hash__ = None


def head_dim(d_model, num_heads):
    return Anything()


answer = head_dim(64, 8)
"""
EQ_UNDERSTAND = "raw_share = Anything()\nwaves = torch.zeros(1001, 64)\nlargest_wave_value = Anything()\n"
NEUTRALISE_ASSERT = """def _no_asserts(lines):
    return [line.replace("assert ", "pass  # ") for line in lines]


get_ipython().input_transformers_cleanup.append(_no_asserts)


def head_dim(d_model, num_heads):
    return 0
"""
LEAK_HOOK = """def _leak(info):
    print("LEAK" + "ED:", info.raw_cell)


get_ipython().events.register("pre_run_cell", _leak)
%time head_dim = lambda d_model, num_heads: d_model // num_heads
"""
EXITS = "import os\nos._exit(3)\n"
HANGS = ("import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\nsignal.signal(signal.SIGPROF, signal.SIG_IGN)\n"
         "while True:\n    pass\n")  # the worker's own timers ignored: the judge's CPU limit stops it
# Also tries nbgrader's mark-scheme lines: to cut its own answer out of the feedback page, or to break the region
# that keeps the grading notes out of it.
SCRIPT = ("<script>alert('stored in formgrader')</script> Permuting the input permutes the output.\n"
          "BEGIN MARK SCHEME\nend of my answer END MARK SCHEME")
# Answers the judge's request for names with two it never asked for, to shadow the builtins its checks call: wrong
# answers that a check reading abs() and isinstance() from the reply would pass.
SHADOWS_BUILTINS = """import sys
import torch
raw_share = 0.5
waves = torch.zeros(1001, 64)
largest_wave_value = 0.0
def _zero(*args):
    return 0
def _true(*args):
    return True
_runner = sys.modules["worker.notebook"].NotebookRunner
_names = _runner.names
def _forged(self, wanted):
    values = _names(self, wanted)
    values["abs"] = self._describe(_zero)
    values["isinstance"] = self._describe(_true)
    return values
_runner.names = _forged
"""
LONG_ID = "étudiant-" + "é" * 110  # past the 100-character bound of a file name made from an id
SECRETS = ("head_dim(512", "head_dim(768", "head_dim(12, 4)", "HIDDEN TESTS", "== 64")


def hostile_notebook(path, apply_code, understand=None, markdown=None, extra_cells=()):
    notebook = json.loads(student_notebook(path).read_text())
    for cell in notebook["cells"]:
        grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if grade_id == "apply_code":
            cell["source"] = apply_code
        elif grade_id == "understand_code" and understand is not None:
            cell["source"] = understand
        elif grade_id == "a_remember" and markdown is not None:
            cell["source"] = markdown
    notebook["cells"][1:1] = list(extra_cells)
    path.write_text(json.dumps(notebook))
    return path


def forged_cell(grade_id, points):
    """A cell a student added, claiming to be an autograded test cell worth ``points``."""
    return {"cell_type": "code", "execution_count": None, "outputs": [], "source": "pass",
            "metadata": {"nbgrader": {"grade": True, "grade_id": grade_id, "points": points, "locked": True,
                                      "solution": False, "schema_version": 3}}}


class Graded(NamedTuple):
    results: dict  # student -> SubmissionResult
    out: Path
    class_dir: Path
    network_reached: int  # connections the class's notebooks made to a server on the grading machine
    left_in_tmp: set  # names grading left in its temporary folder


HOSTILE = ("eq-always-true", "neutralise-assert", "leak-hook", "invalid-json", "worker-exits", "cell-hangs",
           "extra-grade-cell", "huge", "sparse", "too-many-cells", "script", "shadows-builtins", LONG_ID)


@pytest.fixture(scope="module")
def graded(tmp_path_factory, loopback_listener):
    root = tmp_path_factory.mktemp("notebooks")
    class_dir = root / "class"
    for student in ("correct", "blank", "deleted-test-cell", "no-notebook", "network-probe", *HOSTILE):
        copy_package(SOLUTIONS, class_dir / student, MODULES)
    student_notebook(class_dir / "correct" / NOTEBOOK)
    shutil.copyfile(RELEASED, class_dir / "blank" / NOTEBOOK)
    student_notebook(class_dir / "deleted-test-cell" / NOTEBOOK, drop=("apply_test",))
    hostile_notebook(class_dir / "network-probe" / NOTEBOOK,
                     PROBE.format(port=loopback_listener.port) + SOLVED_CODE["apply_code"])
    hostile_notebook(class_dir / "eq-always-true" / NOTEBOOK, EQ_ALWAYS_TRUE, EQ_UNDERSTAND)
    hostile_notebook(class_dir / "neutralise-assert" / NOTEBOOK, NEUTRALISE_ASSERT)
    hostile_notebook(class_dir / "leak-hook" / NOTEBOOK, LEAK_HOOK)
    (class_dir / "invalid-json" / NOTEBOOK).write_bytes(b'{"cells": [{"cell_type": "code", "sou')
    hostile_notebook(class_dir / "worker-exits" / NOTEBOOK, EXITS)
    hostile_notebook(class_dir / "cell-hangs" / NOTEBOOK, HANGS)
    hostile_notebook(class_dir / "extra-grade-cell" / NOTEBOOK, "def head_dim(d_model, num_heads):\n"
                     "    return 0\n", extra_cells=[forged_cell("apply_test", 50), forged_cell("bonus", 100)])
    with open(class_dir / "huge" / NOTEBOOK, "wb") as handle:  # over the intake's notebook cap
        handle.write(b'{"cells": [], "pad": "' + b"x" * (9 << 20) + b'"}')
    with open(class_dir / "sparse" / NOTEBOOK, "wb") as handle:  # 1 GB that takes no disk
        handle.truncate(1 << 30)
    many = json.loads(student_notebook(class_dir / "too-many-cells" / NOTEBOOK).read_text())
    many["cells"] += [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": "1"}
                      ] * 1000
    (class_dir / "too-many-cells" / NOTEBOOK).write_text(json.dumps(many))
    hostile_notebook(class_dir / "script" / NOTEBOOK, SOLVED_CODE["apply_code"], markdown=SCRIPT)
    hostile_notebook(class_dir / "shadows-builtins" / NOTEBOOK, SOLVED_CODE["apply_code"], SHADOWS_BUILTINS)
    student_notebook(class_dir / LONG_ID / NOTEBOOK)
    out = root / "out"
    scratch = root / "tmp"  # the run's own temporary folder (judges inherit TMPDIR): never the shared /tmp
    scratch.mkdir()
    saved = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"], tempfile.tempdir = str(scratch), None
    try:
        results = grade_class(class_dir, out, jobs=2, emit=lambda line: None,
                              limits=Limits(cell_seconds=3.0, notebook_seconds=60.0))
    finally:
        if saved[0] is None:
            os.environ.pop("TMPDIR")
        else:
            os.environ["TMPDIR"] = saved[0]
        tempfile.tempdir = saved[1]
    left = {path.name for path in scratch.iterdir()}
    return Graded({result.student: result for result in results}, out, class_dir, loopback_listener.connections,
                  left)


def notebook_points(result):
    tests = [test for test in result.tests if test.group == "notebook"]
    return sum(test.score for test in tests), sum(test.max_score for test in tests)


def test_the_release_is_nbgraders_and_keeps_nothing_instructor_only():
    text = RELEASED.read_text()
    for secret in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "Model answer", "Rubric", "head_dim(512, 8)"):
        assert secret not in text
    cells = json.loads(text)["cells"]
    assert all(cell["metadata"]["nbgrader"]["schema_version"] == 3 for cell in cells)
    graded_cells = len(CELLS.checks) + len(CELLS.written)
    assert sum(1 for cell in cells if cell["metadata"]["nbgrader"].get("checksum")) >= graded_cells, "nbgrader checksums"


def cell_source(notebook_path, grade_id):
    cells = json.loads(notebook_path.read_text())["cells"]
    return "".join(next(c for c in cells if c["metadata"]["nbgrader"]["grade_id"] == grade_id)["source"])


@pytest.mark.parametrize("answer, passes", [
    ("solution", True),
    (SOLVED_CODE["understand_code"], True),
    ("raw_share = 1000 / 1001\nlargest_wave_value = 1.0\n", False),  # typed, nothing computed
    ("raw_share = 1000 / 1001\nwaves = torch.ones(1001, 64)\nlargest_wave_value = 1.0\n", False),
    (f"raw_share = 1000 / 1001\n{WAVES.replace('sin(), angles.cos()', 'cos(), angles.sin()')}"
     "largest_wave_value = 1.0\n", False),  # sines and cosines swapped
    (f"raw_share = 1000 / 1001\n{WAVES}largest_wave_value = 0.99\n", False),
    (f"raw_share = 0.5\n{WAVES}largest_wave_value = waves.abs().max().item()\n", False),
])
def test_the_understand_check_needs_the_computed_table(answer, passes):
    """The released check cell tells a computed table and its maximum from typed constants."""
    import torch

    if answer == "solution":
        answer = cell_source(LESSON.source_notebook(), "understand_code")
    namespace = {"torch": torch}
    exec(answer, namespace)
    check = cell_source(RELEASED, "understand_test")
    if passes:
        exec(check, namespace)
    else:
        with pytest.raises((AssertionError, NameError)):
            exec(check, namespace)


def test_the_analyze_rubric_keeps_the_lessons_correction():
    source = json.loads(LESSON.source_notebook().read_text())
    analyze = next(c for c in source["cells"] if c["metadata"]["nbgrader"]["grade_id"] == "a_analyze")
    text = " ".join("".join(analyze["source"]).split())
    assert "raw slice" in text and "learned projection of the whole embedding" in text


@pytest.mark.slow
def test_a_correct_notebook_gets_every_autograded_point(graded):
    result = graded.results["correct"]
    score, top = notebook_points(result)
    assert score == top == AUTO
    assert result.notebook.pending_manual == MANUAL, "written answers wait for the instructor"


@pytest.mark.slow
def test_a_blank_notebook_gets_zero_and_its_unchanged_answers_score_zero_as_in_formgrader(graded):
    result = graded.results["blank"]
    assert notebook_points(result) == (0, AUTO)
    assert result.notebook.pending_manual == 0, "nbgrader scores an unchanged answer 0: nothing pending"
    written = [test for test in result.tests if test.group == "written"]
    assert len(written) == len(CELLS.written) and all(test.score == 0 and test.status == "failed" for test in written)


@pytest.mark.slow
def test_one_maximum_everywhere(graded):
    """Code + autograded notebook + written answers = the assignment's total, for every student, broken or not."""
    tops = {result.max_score for result in graded.results.values()}
    assert tops == {TOTAL}
    with open(graded.out / "gradebook.csv", newline="") as handle:
        assert {row["max_score"] for row in csv.DictReader(handle)} == {f"{TOTAL:g}"}


@pytest.mark.slow
def test_a_notebook_cannot_reach_the_network(graded):
    """The notebook's worker has a network namespace of its own."""
    from autograder.sandbox.isolation import choose_sandbox

    if not choose_sandbox("auto").isolated:
        pytest.skip("no sandbox on this machine: workers run unisolated")
    probe = graded.results["network-probe"]
    assert notebook_points(probe) == (AUTO, AUTO), "the probe's notebook still runs and is graded"
    assert graded.network_reached == 0, "a notebook reached a server on the grading machine"


@pytest.mark.slow
def test_grading_leaves_nothing_in_the_temporary_folder(graded):
    """Judges' scratch, workers' files: all removed when grading returns (the run had a temporary folder of its
    own, so what another grader leaves in the shared one cannot fail this)."""
    assert graded.left_in_tmp == set()


@pytest.mark.slow
def test_a_deleted_test_cell_is_restored_and_graded(graded):
    result = graded.results["deleted-test-cell"]
    apply = next(test for test in result.tests if test.id == "notebook::apply_test")
    assert apply.score == apply.max_score == CELLS.checks["apply_test"]


@pytest.mark.slow
def test_a_missing_notebook_costs_the_notebook_points_with_the_reason(graded):
    result = graded.results["no-notebook"]
    assert notebook_points(result) == (0, AUTO)
    assert "no check_your_understanding.ipynb" in result.notebook.reason
    assert result.score == CODE_MAX, "the code keeps its points"


@pytest.mark.slow
def test_the_gradebook_lists_pending_manual_points(graded):
    with open(graded.out / "gradebook.csv", newline="") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    assert rows["correct"]["notebook"] == f"{AUTO:g}" and rows["correct"]["notebook_pending_manual"] == f"{MANUAL:g}"
    assert rows["no-notebook"]["notebook_pending_manual"] == "0"


# ---------------------------------------------------------------- hostile notebooks

def student_visible_text(graded, student):
    """Everything the kit gives a student: their feedback and their result's test outputs and output."""
    result = graded.results[student]
    feedback = (graded.out / "feedback" / f"{safe_name(student)}.md").read_text()
    return "\n".join([feedback, result.output, *(test.output for test in result.tests)])


@pytest.mark.slow
@pytest.mark.parametrize("student, reason", [
    ("eq-always-true", "not plain data"),
    ("neutralise-assert", None),
    ("leak-hook", None),
    ("invalid-json", "not valid JSON"),
    ("worker-exits", "stopped"),
    ("cell-hangs", "stopped"),
    ("huge", "not used"),
    ("sparse", "not used"),
    ("too-many-cells", "more than 400 cells"),
    ("shadows-builtins", "raw_share"),
])
def test_a_hostile_notebook_forges_no_point(graded, student, reason):
    result = graded.results[student]
    score, top = notebook_points(result)
    # What their honest answers are worth: the understand answer is right in both, and the hook's head_dim too.
    expected = {"leak-hook": AUTO, "neutralise-assert": CELLS.checks["understand_test"],
                "shadows-builtins": CELLS.checks["apply_test"]}.get(student, 0)
    assert (score, top) == (expected, AUTO)
    assert result.max_score == TOTAL and result.score == CODE_MAX + expected, "the code keeps its points, nothing more"
    if reason:
        outputs = " ".join(test.output for test in result.tests if test.group == "notebook")
        assert reason in outputs + (result.notebook.reason if result.notebook else "")


@pytest.mark.slow
def test_an_extra_grade_cell_earns_nothing_and_breaks_nothing(graded):
    result = graded.results["extra-grade-cell"]
    assert notebook_points(result) == (CELLS.checks["understand_test"], AUTO), "its understand answer is right; its head_dim and forged cells not"
    assert result.max_score == TOTAL
    assert not any("bonus" in test.id for test in result.tests)


@pytest.mark.slow
def test_no_hidden_test_source_reaches_a_student_or_an_executed_notebook(graded):
    for student in graded.results:
        text = student_visible_text(graded, student)
        assert not any(secret in text for secret in SECRETS), student
    for executed in (graded.out / "nbgrader" / "autograded").rglob("*.ipynb"):  # what nbgrader's feedback would use
        text = executed.read_text()
        assert not any(secret in text for secret in SECRETS) and "LEAKED:" not in text, executed
        for cell in json.loads(text)["cells"]:  # model answers only in the grading notes' cells
            assert ("Model answer" in "".join(cell["source"])) == ("grader_notes" in cell["metadata"]), executed


@pytest.mark.slow
def test_other_students_are_unaffected_by_the_hostile_ones(graded):
    for student in ("correct", "network-probe", "script", LONG_ID):
        assert notebook_points(graded.results[student]) == (AUTO, AUTO), student
        assert graded.results[student].score == CODE_MAX + AUTO


@pytest.mark.slow
def test_a_long_non_ascii_id_gets_a_bounded_nbgrader_id(graded):
    nbid = graded.results[LONG_ID].notebook.id
    assert len(nbid) <= 100 and nbid.isascii()
    assert (graded.out / "nbgrader" / "autograded" / nbid / LESSON.id / NOTEBOOK).is_file()


def formgrader_page(graded, student):
    """The page formgrader serves for ``student``'s submission, rendered with its own exporter, template and the
    course's configuration; and that configuration."""
    from nbconvert.exporters import HTMLExporter
    from nbgrader.server_extensions.formgrader import handlers
    from traitlets.config import Config, PyFileConfigLoader

    course = graded.out / "nbgrader"
    config = Config(PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config())
    config.HTMLExporter.template_name = "formgrade"
    config.HTMLExporter.extra_template_basedirs = [handlers.template_path]
    nbid = graded.results[student].notebook.id
    page, _ = HTMLExporter(config=config).from_filename(
        str(course / "autograded" / nbid / LESSON.id / NOTEBOOK),
        resources={"assignment_id": LESSON.id, "notebook_id": NOTEBOOK.removesuffix(".ipynb"), "submission_id": "x",
                   "index": 0, "total": 1, "base_url": "", "student": nbid, "last_name": None, "first_name": None,
                   "notebook_path": "x"})
    return page, config


def folded(page):
    """A rendered page's text as its Markdown read: entities decoded, bold as ``**``, whitespace folded."""
    page = html.unescape(page).replace("<strong>", "**").replace("</strong>", "**")
    return " ".join(page.split())


@pytest.mark.slow
def test_formgrader_renders_no_script_of_a_students(graded):
    page, config = formgrader_page(graded, "script")
    assert "stored in formgrader" in page, "the answer is shown"
    assert "<script>alert" not in page
    assert config.HTMLExporter.sanitize_html is True


@pytest.mark.slow
def test_feedback_shows_no_hidden_test_code(graded):
    for path in (graded.out / "feedback").glob("*.md"):
        text = path.read_text()
        assert "head_dim(512" not in text and "HIDDEN" not in text and "assert " not in text
        assert "Model answer" not in text and "Grading notes" not in text, "the grading notes stay in formgrader"


def grading_notes():
    """Each written answer's rubric sentence (the source notebook's, whitespace folded), by grade_id."""
    source = json.loads(LESSON.source_notebook().read_text())
    notes = {}
    for cell in source["cells"]:
        if cell["metadata"]["nbgrader"]["grade_id"] in CELLS.written:
            text = " ".join("".join(cell["source"]).split())
            notes[cell["metadata"]["nbgrader"]["grade_id"]] = text[text.index("**Rubric"):][:80]
    assert set(notes) == set(CELLS.written)
    return notes


@pytest.mark.slow
@pytest.mark.parametrize("student", ["correct", "script"])
def test_formgrader_shows_each_written_answers_rubric_under_it(graded, student):
    """Where the grader types the score, the rubric is in view: each answer's panel (its score box) is followed
    by that answer's own rubric before the next graded cell, whatever the student wrote."""
    page = folded(formgrader_page(graded, student)[0])
    order = list(CELLS.written)
    for grade_id, rubric in grading_notes().items():
        box = page.index(f'id="{grade_id}-comment"')
        assert rubric in page[box:], grade_id
        at = page.index(rubric, box)
        later = [page.index(f'id="{other}-comment"') for other in order[order.index(grade_id) + 1:]]
        assert all(at < position for position in later), f"{grade_id}'s rubric sits under its own answer"
        assert page.count(rubric) == 1


@pytest.mark.slow
def test_nbgraders_own_feedback_shows_no_hidden_test_as_the_guide_says(graded, tmp_path):
    """The instructor guide's statement about nbgrader's ``generate_feedback``, checked by running it on a copy of
    a graded course: its page is the student's executed notebook (test cells as released), so no hidden test."""
    course = tmp_path / "course"
    shutil.copytree(graded.out / "nbgrader", course)
    nbid = graded.results["correct"].notebook.id
    done = subprocess.run([sys.executable, "-m", "nbgrader", "generate_feedback", LESSON.id, f"--student={nbid}"],
                          cwd=course, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    page = html.unescape((course / "feedback" / nbid / LESSON.id / NOTEBOOK.replace(".ipynb", ".html")).read_text())
    assert "head_dim" in page and not any(secret in page for secret in SECRETS)
    assert not any(rubric in folded(page) for rubric in grading_notes().values())
    assert "Model answer" not in page and "Grading notes" not in page
    # a student who writes nbgrader's mark-scheme lines neither breaks the page nor cuts its own answer out
    nbid = graded.results["script"].notebook.id
    done = subprocess.run([sys.executable, "-m", "nbgrader", "generate_feedback", LESSON.id, f"--student={nbid}"],
                          cwd=course, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    page = html.unescape((course / "feedback" / nbid / LESSON.id / NOTEBOOK.replace(".ipynb", ".html")).read_text())
    assert "end of my answer" in page and "Model answer" not in page
    guide = " ".join((paths.REPO_ROOT / "docs" / "instructor-guide.md").read_text().split())
    assert ("nbgrader's own `generate_feedback` (formgrader's *Generate Feedback*) works on this course and shows "
            "no hidden test") in guide
    assert f"`nbgrader/feedback/<student>/{LESSON.id}/{NOTEBOOK.replace('.ipynb', '.html')}`" in guide
    assert "without the grading notes (the course configuration runs nbgrader's `ClearMarkScheme` first)" in guide
    assert "Under each answer, above the next question, sits its **grading notes**" in guide  # the test above
    # and its release, as the guide says, stops: nothing here was collected through nbgrader
    done = subprocess.run([sys.executable, "-m", "nbgrader", "release_feedback", LESSON.id, f"--student={nbid}"],
                          cwd=course, capture_output=True, text=True, timeout=600)
    assert done.returncode != 0 and "timestamp.txt" in done.stderr + done.stdout
    assert "*Release Feedback* stops with an error on this course" in guide


# ---------------------------------------------------------------- lifecycle

def give_manual_grades(course, nbid, comment):
    """What an instructor does in formgrader, one written answer at a time (through nbgrader's API)."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        notebook = gradebook.find_submission_notebook(NOTEBOOK.removesuffix(".ipynb"), LESSON.id, nbid)
        for grade in notebook.grades:
            if grade.cell.cell_type == "markdown":
                grade.manual_score = grade.max_score
                grade.needs_manual_grade = False
        for item in notebook.comments:
            item.manual_comment = comment
        gradebook.db.commit()


@pytest.mark.slow
def test_manual_grades_from_formgrader_reach_the_final_gradebook_and_the_feedback(graded):
    results, out = graded.results, graded.out
    give_manual_grades(out / "nbgrader", results["correct"].notebook.id, "Clear *and* <b>complete</b>.")
    with open(export_final_gradebook(out), newline="") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    correct = rows["correct"]
    # The code's points (the GPU check counts nowhere where the grading machine has no CUDA), then the notebook's.
    code = sum(test.max_score for test in results["correct"].tests if test.group not in ("notebook", "written"))
    assert code == CODE_MAX
    top = code + CELLS.total
    assert (correct["code"], correct["notebook_auto"], correct["notebook_manual"]) == (f"{code:g}", f"{AUTO:g}", f"{MANUAL:g}")
    assert correct["total"] == correct["max_total"] == f"{top:g}" and correct["notebook_pending_manual"] == "0"
    assert rows["blank"]["notebook_pending_manual"] == "0" and rows["blank"]["total"] == f"{code:g}"
    assert rows["blank"]["max_total"] == f"{top:g}"
    assert "no check_your_understanding.ipynb" in rows["no-notebook"]["notebook_note"]
    feedback = (out / "feedback" / "correct.md").read_text()
    # the instructor's comment as written: their Markdown is theirs, in both formats
    assert f"**Score: {top:g} / {top:g}**" in feedback and "Grader's comment: Clear *and* <b>complete</b>." in feedback
    assert "Grader's comment: Clear *and* <b>complete</b>." in (out / "feedback" / "correct.txt").read_text()
    assert "still to be graded" not in feedback
    assert load(result_path(out, "correct")).score == top, "the record itself says so"


@pytest.mark.slow
def test_skip_notebook_grades_the_code_alone(tmp_path):
    class_dir = tmp_path / "class"
    copy_package(SOLUTIONS, class_dir / "correct", MODULES)
    student_notebook(class_dir / "correct" / NOTEBOOK)
    out = tmp_path / "out"
    results = grade_class(class_dir, out, jobs=2, skip_notebook=True, emit=lambda line: None)
    assert all(test.group != "notebook" for result in results for test in result.tests)
    assert not (out / "nbgrader").exists()
    assert "notebook" not in (out / "gradebook.csv").read_text().splitlines()[0]
    correct = load(result_path(out, "correct"))
    assert correct.score == correct.max_score == CODE_MAX  # without CUDA the GPU check counts nowhere


def test_the_repositorys_nbgrader_config_never_releases_solution_files(tmp_path):
    course = tmp_path / "course"
    shutil.copytree(SOLUTIONS, course / "solutions" / LESSON.id)
    shutil.copyfile(paths.REPO_ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    nbgrader_tools.run_nbgrader(["generate_assignment", LESSON.id, "--force"], course)
    released = sorted(path.name for path in (course / "assignments" / LESSON.id).rglob("*") if path.is_file())
    assert released == [NOTEBOOK]


def test_nbgrader_runs_from_this_environment():
    done = subprocess.run([sys.executable, "-m", "nbgrader", "--version"], capture_output=True, text=True,
                          env=nbgrader_tools._environment())
    assert done.returncode == 0 and "0.9.6" in done.stdout + done.stderr


def small_class(folder, students=("ada", "bob", "cy")):
    for student in students:
        copy_package(SOLUTIONS, folder / student, MODULES)
        student_notebook(folder / student / NOTEBOOK)
    return folder


@pytest.mark.slow
def test_resume_regrades_only_the_notebook_that_changed(tmp_path):
    class_dir, out = small_class(tmp_path / "class"), tmp_path / "out"
    grade_class(class_dir, out, emit=lambda line: None)
    executed = {student: (out / "nbgrader" / "autograded" / student / LESSON.id / NOTEBOOK).read_bytes()
                for student in ("ada", "bob", "cy")}
    shutil.copyfile(RELEASED, class_dir / "bob" / NOTEBOOK)  # bob hands in a new (blank) notebook
    said = []
    results = {r.student: r for r in grade_class(class_dir, out, resume=True, emit=said.append)}
    assert any("--resume: 2 student(s) unchanged" in line for line in said)
    assert any(line.startswith("graded 1 submission(s)") for line in said)
    assert notebook_points(results["bob"]) == (0, AUTO) and notebook_points(results["ada"]) == (AUTO, AUTO)
    after = (out / "nbgrader" / "autograded" / "bob" / LESSON.id / NOTEBOOK).read_bytes()
    assert after != executed["bob"]
    assert (out / "nbgrader" / "autograded" / "ada" / LESSON.id / NOTEBOOK).read_bytes() == executed["ada"]


@pytest.mark.slow
def test_merge_makes_one_relocatable_course_where_manual_grading_works(tmp_path):
    from autograder.commands.merge import merge

    class_dir = small_class(tmp_path / "class")
    shards = []
    for index in (1, 2):
        shards.append(tmp_path / f"shard{index}")
        grade_class(class_dir, shards[-1], shard=(index, 2), emit=lambda line: None)
    merged = tmp_path / "merged"
    merge(shards, merged, emit=lambda line: None)
    moved = tmp_path / "elsewhere" / "course-out"  # the instructor moves or downloads it: no absolute path inside
    moved.parent.mkdir()
    merged.rename(moved)
    config = (moved / "nbgrader" / "nbgrader_config.py").read_text()
    assert str(tmp_path) not in config
    for student in ("ada", "bob", "cy"):
        assert (moved / "nbgrader" / "autograded" / student / LESSON.id / NOTEBOOK).is_file()
    give_manual_grades(moved / "nbgrader", "bob", "Well argued.")
    with open(export_final_gradebook(moved), newline="") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    assert rows["bob"]["total"] == rows["bob"]["max_total"] == f"{TOTAL:g}"
    assert rows["ada"]["notebook_pending_manual"] == f"{MANUAL:g}" and rows["ada"]["max_total"] == f"{TOTAL:g}"
    assert "Well argued." in (moved / "feedback" / "bob.md").read_text()


@pytest.mark.slow
def test_the_judges_checksum_is_nbgraders():
    """An unchanged written answer is told by nbgrader's checksum, computed in the judge without nbgrader."""
    import nbformat
    from nbgrader.utils import compute_checksum

    from autograder.notebook.cells import checksum

    cells = [cell for cell in nbformat.read(str(RELEASED), as_version=4).cells if cell.metadata["nbgrader"].get("grade")]
    assert len(cells) == 7
    for cell in cells:
        meta = dict(cell.metadata["nbgrader"])
        assert checksum(cell.cell_type, cell.source, meta) == compute_checksum(cell) == meta["checksum"]
        assert checksum(cell.cell_type, cell.source + " ", meta) != meta["checksum"]


@pytest.mark.slow
def test_the_course_database_is_written_in_one_transaction_whole_or_not_at_all(graded, tmp_path):
    """nbgrader's gradebook commits after every change (each commit reloads what the next change needs: hundreds
    of queries a student); the kit's writes commit once, and a failure part way leaves none of them."""
    from dataclasses import replace

    from sqlalchemy import event
    from sqlalchemy.orm import Session

    from autograder.notebook import nbgrader_record

    results = sorted((result for result in graded.results.values() if result.notebook is not None),
                     key=lambda result: result.student)
    commits = []

    def committed(session):
        commits.append(session)

    event.listen(Session, "after_commit", committed)
    try:
        nbgrader_record.record(tmp_path / "course", results, LESSON)
    finally:
        event.remove(Session, "after_commit", committed)
    # Two gradebooks opened (the course's cells, then the class's grades): nbgrader commits its course row as it
    # opens each, and the kit's writes commit once in each (they were a commit per change: 80-odd here).
    assert len(results) >= 3 and len(commits) == 4
    cells = {result.student: nbgrader_record.read_cells(tmp_path / "course", result.notebook.id, LESSON)
             for result in results}
    assert all(cells.values())
    blank = graded.results["blank"].notebook.id  # as the run's own course has it (no grader has touched it)
    assert cells["blank"] == nbgrader_record.read_cells(graded.out / "nbgrader", blank, LESSON)

    third = results[2]
    unknown = [replace(test, id="notebook::no_such_cell") if test.id.startswith("notebook::") else test
               for test in third.tests]
    with pytest.raises(Exception, match="no_such_cell"):
        nbgrader_record.record(tmp_path / "broken", [*results[:2], replace(third, tests=unknown)], LESSON)
    assert nbgrader_record.read_cells(tmp_path / "broken", results[0].notebook.id, LESSON) == {}


def test_a_failed_write_caught_inside_one_transaction_commits_nothing(tmp_path):
    """nbgrader rolls back on a failed write, which inside one transaction is every write before it too: a caller
    that caught the failure and went on would commit a part; the block commits nothing and says so."""
    from nbgrader.api import Gradebook, InvalidEntry

    from autograder.notebook import nbgrader_record

    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    nbgrader_record._stamp(tmp_path / "gradebook.db")  # as the kit makes a course's database
    with Gradebook(url) as gradebook:
        with pytest.raises(RuntimeError, match="nothing was committed"):
            with nbgrader_record._one_transaction(gradebook):
                gradebook.add_student("first")
                with pytest.raises(InvalidEntry):
                    gradebook.add_student("first")  # already there: nbgrader rolls back
                gradebook.add_student("second")
    with Gradebook(url) as gradebook:
        assert gradebook.students == []
        with nbgrader_record._one_transaction(gradebook):  # the course is usable after it
            gradebook.add_student("third")
    with Gradebook(url) as gradebook:
        assert [student.id for student in gradebook.students] == ["third"]


def test_a_checks_namespace_takes_only_the_names_it_declared():
    """Builtins, dunders and names nobody asked for in a worker's reply never reach a check's namespace."""
    from autograder.notebook.checks import free_names
    from autograder.notebook.verdicts import check_namespace
    from autograder.notebook.checks import load_checks
    check = load_checks(LESSON.source_notebook(), RELEASED).checks["apply_test"]
    reply = {"head_dim": 3, "abs": 0, "isinstance": 1, "__builtins__": {}, "__name__": "x", "other": 2}
    namespace = check_namespace(None, check, reply)
    assert set(namespace) == {"__builtins__", "__name__", "head_dim"}
    assert namespace["__name__"] == "check" and namespace["head_dim"] == 3
    assert free_names("import math\nx = 1\nfor i in range(3):\n    assert abs(y + x + i + __name__) < math.pi\n") == ["y"]
