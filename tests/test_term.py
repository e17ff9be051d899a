"""The instructor guide, run as written: every block marked as a step of the term runs here, in order, on a
small class with notebooks, with formgrader's part done through nbgrader's API. A guide that drifts from the kit
fails this test."""

import csv
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from autograder import paths
from autograder.lesson.catalogue import copy_package

GUIDE = paths.REPO_ROOT / "docs" / "instructor-guide.md"
STEPS = ("release", "grade", "shards", "gradescope-local", "similarity", "final-gradebook", "regrade")
from lesson import LESSON, MODULES, NOTEBOOK


def term_steps(text=None, kind="term"):
    """``{step name: shell text}`` of the guide's blocks fenced as ```sh term=NAME (or another ``kind``), in the
    guide's order."""
    text = GUIDE.read_text() if text is None else text
    return {name: body for name, body in re.findall(rf"^```sh {kind}=(\S+)\n(.*?)^```$", text, re.S | re.M)}


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

    # The Gradescope zip, tried locally (step 4c): its own copy of the kit gives ada the grade step 4a gave her.
    out = run_step("gradescope-local", term)
    gradescope = json.loads((term / "gradescope" / "results" / "results.json").read_text())
    assert gradescope["score"] == float(first["ada"]["score"]) > 0 and '"score"' in out
    assert gradescope["extra_data"]["sandbox"] in ("bwrap", "uid")

    # Similar submissions (step 4d): ada and cy handed in the same code; bo, the stubs, matches no one.
    run_step("similarity", term)
    page = (graded / "similarity.md").read_text()
    assert "| 1 | ada | cy | 100% |" in page
    with_bo = [line for line in page.splitlines() if "| bo |" in line]
    assert len(with_bo) == 2 and all("| 0% |" in line for line in with_bo)
    assert "[similarity.md](similarity.md)" in (graded / "report.md").read_text()

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
    assert "Well argued." in (graded / "feedback" / "ada.txt").read_text()
    assert "[similarity.md](similarity.md)" in (graded / "report.md").read_text(), "rewritten, still linked"

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
    from autograder.records.results import write_atomic

    old = os.umask(0o027)
    try:
        write_atomic(tmp_path / "shared.txt", "x")
    finally:
        os.umask(old)
    assert (tmp_path / "shared.txt").stat().st_mode & 0o777 == 0o640


def _no_bubblewrap(command):
    """``command`` (a shell line) in a private mount namespace in which bwrap fails: nothing outside changes."""
    bwrap = shutil.which("bwrap")
    return ["unshare", "-m", "bash", "-euo", "pipefail", "-c",
            (f"mount --bind /bin/false {bwrap}\n" if bwrap else "") + command]


def test_a_machine_without_bubblewrap_refuses_then_recovers_as_the_guide_says():
    """Where bubblewrap is refused and the kit's .venv comes from a Python other users cannot read (a pyenv under
    /root), the default ``grade`` grades nothing and names the cause and the fix; the guide's recovery steps
    (a .venv from the distribution's Python, in a copy of the kit) then grade in the confined mode."""
    import sys
    import tempfile

    from autograder.errors import KitError
    from autograder.sandbox import isolation as sandboxes
    from autograder.records.results import load_record

    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare to make bubblewrap fail in a private mount namespace")
    if sandboxes.runtime_problem() is None or sandboxes.system_python() is None:
        pytest.skip("needs this kit's runtime unreadable by other users and a distribution Python beside it")
    try:
        sandboxes.choose_sandbox("bwrap")
    except KitError as error:
        pytest.skip(f"needs bubblewrap here, for the outcome the confined mode must match: {error}")
    steps = term_steps(kind="recovery")
    assert list(steps) == ["no-bubblewrap"] and "make PYTHON=/usr/bin/python3" in steps["no-bubblewrap"]
    root = Path(tempfile.mkdtemp(prefix="kit-recovery-"))  # every folder above a confined worker's runtime passable
    try:
        root.chmod(0o755)
        term = root / "term"
        _student(term / "class", "ada", LESSON.solutions, LESSON.source_notebook())
        environment = dict(os.environ, KIT=str(root / "kit"), TERM_DIR=str(term))
        # (a) this kit, as it is: refused in one line, naming the runtime's folder and the fix
        refused = subprocess.run(_no_bubblewrap(f"{sys.executable} -m autograder grade {term / 'class'} --out "
                                                f"{term / 'refused'}"), cwd=paths.REPO_ROOT, env=environment,
                                 capture_output=True, text=True, timeout=600)
        assert refused.returncode == 2, refused.stdout[-2000:] + refused.stderr[-2000:]
        line = refused.stderr.strip()
        assert "\n" not in line and "no sandbox works here" in line and "bubblewrap:" in line, line
        assert "is not readable by an unprivileged user" in line and "rm -rf .venv && make PYTHON=" in line, line
        assert not (term / "refused" / "results").exists()
        # (b) the guide's steps, run as written in a copy of the kit (its tracked files; the venv rebuilt)
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=paths.REPO_ROOT, capture_output=True, check=True)
        for name in filter(None, listed.stdout.decode().split("\0")):
            if (paths.REPO_ROOT / name).is_file():
                (root / "kit" / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(paths.REPO_ROOT / name, root / "kit" / name)
        done = subprocess.run(_no_bubblewrap(steps["no-bubblewrap"]), cwd=root / "kit", env=environment,
                              capture_output=True, text=True, timeout=1500)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        result, problem = load_record(term / "graded" / "results" / "ada.json")
        assert problem == "" and result.sandbox == "uid", (problem, result.sandbox)
        # exactly what bubblewrap gives the same class, test by test
        from autograder.commands.grading import grade_class

        (expected,) = grade_class(term / "class", term / "bwrap", sandbox_mode="bwrap", emit=lambda line: None)
        assert {test.id or test.name: test.status for test in result.tests} == {
            test.id or test.name: test.status for test in expected.tests}
        assert (result.score, result.max_score) == (expected.score, expected.max_score)
    finally:
        shutil.rmtree(root, ignore_errors=True)
