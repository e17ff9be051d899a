"""The instructor guide, run as written: every block marked as a step of the term runs here, in order, on a
small class with notebooks, with formgrader's part done through nbgrader's API. A guide that drifts from the kit
fails this test."""

import csv
import json
import os
import re
import shutil
import subprocess

from autograder import paths
from autograder.mutants import copy_package

GUIDE = paths.REPO_ROOT / "docs" / "instructor-guide.md"
STEPS = ("release", "grade", "shards", "final-gradebook", "regrade")
from lesson import LESSON, MODULES, NOTEBOOK


def term_steps(text=None):
    """``{step name: shell text}`` of the guide's blocks fenced as ```sh term=NAME, in the guide's order."""
    text = GUIDE.read_text() if text is None else text
    return {name: body for name, body in re.findall(r"^```sh term=(\S+)\n(.*?)^```$", text, re.S | re.M)}


def run_step(name, term_dir):
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", term_steps()[name]], cwd=paths.REPO_ROOT,
                          env=dict(os.environ, KIT=str(paths.REPO_ROOT), TERM_DIR=str(term_dir)),
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"step {name}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def test_the_guide_marks_every_step_of_the_term_in_order():
    assert tuple(term_steps()) == STEPS
    assert term_steps("```sh term=a\necho 1\n```\n\n```sh\nnot a step\n```\n") == {"a": "echo 1\n"}


def _student(class_dir, student, package, notebook):
    folder = class_dir / student / "assignments" / LESSON.id
    copy_package(package, folder, MODULES)
    shutil.copyfile(notebook, folder / NOTEBOOK)


def _rows(path):
    with open(path, newline="") as handle:
        return {row["student"]: row for row in csv.DictReader(handle)}


def test_a_term_as_the_guide_tells_it(tmp_path):
    from nbgrader.api import Gradebook

    term = tmp_path / "term"
    class_dir = term / "class"
    solved, released = LESSON.source_notebook(), LESSON.released_notebook()
    _student(class_dir, "ada", LESSON.solutions, solved)
    _student(class_dir, "bo", LESSON.release, released)
    _student(class_dir, "cy", LESSON.solutions, released)

    run_step("release", term)
    assert (term / "template" / ".github" / "workflows" / "classroom.yml").exists()
    assert (term / "autograder.zip").stat().st_size > 0

    run_step("grade", term)
    graded = term / "graded"
    first = _rows(graded / "gradebook.csv")
    assert set(first) == {"ada", "bo", "cy"} and float(first["ada"]["score"]) > float(first["bo"]["score"])
    assert len({row["max_score"] for row in first.values()}) == 1  # one maximum for everyone

    run_step("shards", term)
    merged = _rows(term / "merged" / "gradebook.csv")
    assert {student: row["score"] for student, row in merged.items()} == \
        {student: row["score"] for student, row in first.items()}
    sizes = [json.loads((term / f"shard-{index}" / "shard.json").read_text())["students"] for index in (1, 2)]
    assert sorted(len(students) for students in sizes) == [1, 2]  # even shards by default

    # Formgrader (step 5): the instructor grades ada's written answers and comments.
    nbid = json.loads((graded / "results" / "ada.json").read_text())["extra_data"]["notebook_id"]
    with Gradebook(f"sqlite:///{graded / 'nbgrader' / 'gradebook.db'}") as gradebook:
        notebook = gradebook.find_submission_notebook(NOTEBOOK.removesuffix(".ipynb"), LESSON.id, nbid)
        for grade in notebook.grades:
            if grade.cell.cell_type == "markdown":
                grade.manual_score = grade.max_score
        for comment in notebook.comments:
            comment.manual_comment = "Well argued."
        gradebook.db.commit()

    course = graded / "nbgrader"  # formgrader finds its exchange folder: no "does not exist" banner
    assert (course / "exchange").is_dir() and "Exchange.root" in (course / "nbgrader_config.py").read_text()

    run_step("final-gradebook", term)
    final = _rows(graded / "final_gradebook.csv")
    assert final["ada"]["total"] == final["ada"]["max_total"]
    assert "Well argued." in (graded / "feedback" / "ada.md").read_text()

    # A corrected submission arrives for bo (step 8): only bo is regraded, ada keeps her manual grades.
    shutil.rmtree(class_dir / "bo")
    _student(class_dir, "bo", LESSON.solutions, solved)
    before = {student: (graded / "results" / f"{student}.json").read_text() for student in ("ada", "cy")}
    out = run_step("regrade", term)
    assert "kept" in out
    assert {student: (graded / "results" / f"{student}.json").read_text() for student in ("ada", "cy")} == before
    final = _rows(graded / "final_gradebook.csv")
    assert float(final["bo"]["code"]) == float(final["ada"]["code"]) and final["ada"]["total"] == final["ada"]["max_total"]


def test_outputs_follow_the_umask_so_a_teaching_team_can_read_them(tmp_path):
    from autograder.results import write_atomic

    old = os.umask(0o027)
    try:
        write_atomic(tmp_path / "shared.txt", "x")
    finally:
        os.umask(old)
    assert (tmp_path / "shared.txt").stat().st_mode & 0o777 == 0o640
