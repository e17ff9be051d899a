"""The Check Your Understanding notebook through the real nbgrader: release, autograde, manual grades, export."""

import csv
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

import pytest

from autograder import notebooks, paths
from autograder.final_gradebook import export_gradebook
from autograder.grading import grade_class, result_path
from autograder.mutants import copy_package
from autograder.results import load

RELEASED = paths.ASSIGNMENTS_DIR / "mha_pe" / notebooks.NOTEBOOK
SOLVED_CODE = {
    "understand_code": "raw_share = 1000 / 1001\nlargest_wave_value = 1.0\nprint(raw_share, largest_wave_value)\n",
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


class Graded(NamedTuple):
    results: dict  # student -> SubmissionResult
    out: Path
    class_dir: Path
    network_reached: int  # connections the class's notebooks made to a server on the grading machine
    left_in_tmp: set  # names grading left in its temporary folder


@pytest.fixture(scope="module")
def graded(tmp_path_factory, loopback_listener):
    root = tmp_path_factory.mktemp("notebooks")
    class_dir = root / "class"
    for student in ("correct", "blank", "deleted-test-cell", "no-notebook", "network-probe"):
        copy_package(paths.SOLUTIONS_DIR / "mha_pe", class_dir / student)
    student_notebook(class_dir / "correct" / notebooks.NOTEBOOK)
    shutil.copyfile(RELEASED, class_dir / "blank" / notebooks.NOTEBOOK)
    student_notebook(class_dir / "deleted-test-cell" / notebooks.NOTEBOOK, drop=("apply_test",))
    probe = student_notebook(class_dir / "network-probe" / notebooks.NOTEBOOK)
    cells = json.loads(probe.read_text())
    apply = next(c for c in cells["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "apply_code")
    apply["source"] = PROBE.format(port=loopback_listener.port) + apply["source"]
    probe.write_text(json.dumps(cells))
    out = root / "out"
    # A temporary folder of this run's own (TMPDIR, inherited by judges, nbgrader and kernels): others grading on
    # the same machine write to the shared one meanwhile. Short, for the kernels' Unix-socket paths.
    own_tmp = Path(tempfile.mkdtemp(prefix="nb-"))
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("TMPDIR", str(own_tmp))
            patch.setattr(tempfile, "tempdir", str(own_tmp))
            results = grade_class(class_dir, out, jobs=2, emit=lambda line: None)
        left = {path.name for path in own_tmp.iterdir()}
    finally:
        shutil.rmtree(own_tmp, ignore_errors=True)
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
    assert sum(1 for cell in cells if cell["metadata"]["nbgrader"].get("checksum")) >= 7, "nbgrader checksums"


def test_the_analyze_rubric_keeps_the_lessons_correction():
    source = json.loads(notebooks.SOURCE_NOTEBOOK.read_text())
    analyze = next(c for c in source["cells"] if c["metadata"]["nbgrader"]["grade_id"] == "a_analyze")
    text = " ".join("".join(analyze["source"]).split())
    assert "raw slice" in text and "learned projection of the whole embedding" in text


def test_a_correct_notebook_gets_every_autograded_point(graded):
    result = graded.results["correct"]
    score, top = notebook_points(result)
    assert score == top == 3
    assert result.extra["notebook_pending_manual"] == 13, "written answers wait for the instructor"


def test_a_blank_notebook_gets_zero_with_written_answers_pending(graded):
    result = graded.results["blank"]
    assert notebook_points(result) == (0, 3)
    assert result.extra["notebook_pending_manual"] == 13


def test_a_notebook_cannot_reach_the_network(graded):
    """The kernel's sandbox has a network namespace of its own; its channels to nbgrader are Unix sockets."""
    from autograder.sandbox import choose_sandbox

    if not choose_sandbox("auto").isolated:
        pytest.skip("no sandbox on this machine: kernels run unisolated")
    probe = graded.results["network-probe"]
    assert notebook_points(probe) == (3, 3), "the probe's notebook still runs and is graded"
    assert graded.network_reached == 0, "a notebook reached a server on the grading machine"


def test_grading_leaves_nothing_in_the_temporary_folder(graded):
    """Kernels' channel folders, judges' scratch, workers' files: all removed when grading returns (the run had a
    temporary folder of its own, so what another grader leaves in the shared one cannot fail this)."""
    assert graded.left_in_tmp == set()


def test_a_deleted_test_cell_is_restored_and_graded(graded):
    result = graded.results["deleted-test-cell"]
    apply = next(test for test in result.tests if test.id == "notebook::apply_test")
    assert apply.score == apply.max_score == 2


def test_a_missing_notebook_costs_the_notebook_points_with_the_reason(graded):
    result = graded.results["no-notebook"]
    assert notebook_points(result) == (0, 3)
    assert "no check_your_understanding.ipynb" in result.extra["notebook_reason"]
    assert result.score == result.max_score - 3, "the code keeps its points"


def test_the_gradebook_lists_pending_manual_points(graded):
    out = graded.out
    with open(out / "gradebook.csv", newline="") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    assert rows["correct"]["notebook"] == "3" and rows["correct"]["notebook_pending_manual"] == "13"
    assert rows["no-notebook"]["notebook_pending_manual"] == "0"


def test_feedback_shows_no_hidden_test_code(graded):
    out = graded.out
    for path in (out / "feedback").glob("*.md"):
        text = path.read_text()
        assert "head_dim(512" not in text and "HIDDEN" not in text and "assert " not in text


def test_manual_grades_from_formgrader_reach_the_final_gradebook(graded):
    from nbgrader.api import Gradebook

    results, out = graded.results, graded.out
    db = f"sqlite:///{out / 'nbgrader' / 'gradebook.db'}"
    with Gradebook(db) as gradebook:  # what an instructor does in formgrader, one written answer at a time
        notebook = gradebook.find_submission_notebook("check_your_understanding", "mha_pe",
                                                      results["correct"].extra["notebook_id"])
        for grade in notebook.grades:
            if grade.cell.cell_type == "markdown":
                grade.manual_score = grade.max_score
        gradebook.db.commit()
    with open(export_gradebook(out), newline="") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    correct = rows["correct"]
    # 111 code points, 108 where the grading machine has no CUDA (the GPU check then counts nowhere).
    code = sum(test.max_score for test in results["correct"].tests if test.group != "notebook")
    assert code in (108, 111)
    assert (correct["code"], correct["notebook_auto"], correct["notebook_manual"]) == (f"{code:g}", "3", "13")
    assert correct["total"] == correct["max_total"] == f"{code + 16:g}" and correct["notebook_pending_manual"] == "0"
    assert rows["blank"]["notebook_pending_manual"] == "13" and rows["blank"]["total"] == f"{code:g}"
    assert "no check_your_understanding.ipynb" in rows["no-notebook"]["notebook_note"]


def test_skip_notebook_grades_the_code_alone(graded, tmp_path):
    class_dir = graded.class_dir
    out = tmp_path / "out"
    results = grade_class(class_dir, out, jobs=2, skip_notebook=True, emit=lambda line: None)
    assert all(test.group != "notebook" for result in results for test in result.tests)
    assert not (out / "nbgrader").exists()
    assert "notebook" not in (out / "gradebook.csv").read_text().splitlines()[0]
    correct = load(result_path(out, "correct"))
    assert correct.score == correct.max_score in (108, 111)  # 108 without CUDA: the GPU check counts nowhere


def test_the_repositorys_nbgrader_config_never_releases_solution_files(tmp_path):
    course = tmp_path / "course"
    shutil.copytree(paths.SOLUTIONS_DIR, course / "solutions")
    shutil.copyfile(paths.REPO_ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    notebooks.run_nbgrader(["generate_assignment", "mha_pe", "--force"], course)
    released = sorted(path.name for path in (course / "assignments" / "mha_pe").rglob("*") if path.is_file())
    assert released == [notebooks.NOTEBOOK]


def test_nbgrader_runs_from_this_environment():
    done = subprocess.run([sys.executable, "-m", "nbgrader", "--version"], capture_output=True, text=True,
                          env=notebooks._environment())
    assert done.returncode == 0 and "0.9.6" in done.stdout + done.stderr
