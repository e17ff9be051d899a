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
from autograder.lesson.catalogue import build, copy_package, load_catalogue

GUIDE = paths.REPO_ROOT / "docs" / "instructor-guide.md"
STEPS = ("release", "grade", "shards", "gradescope-local", "similarity", "final-gradebook", "return-feedback", "export",
         "regrade")
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


GIT = ["git", "-c", "user.name=Student", "-c", "user.email=s@example.org", "-c", "init.defaultBranch=main"]
STARTED = "2026-11-20T10:00:00+00:00"
ON_TIME, TWO_DAYS_LATE = "2026-11-30T10:00:00+00:00", "2026-12-03T10:00:00+00:00"  # the guide's deadline: Dec 1


def _commit(repo, when, message="work"):
    env = dict(os.environ, GIT_COMMITTER_DATE=when, GIT_AUTHOR_DATE=when)
    subprocess.run([*GIT, "-C", str(repo), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(repo), "commit", "-qm", message], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "push", "-q", "origin", "HEAD"], check=True, capture_output=True)
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


def _clone(term, folder):
    """A student's repository as GitHub Classroom makes it (a bare remote, the starter committed and pushed) and
    the instructor's clone of it in the class folder."""
    remote = term / "remotes" / f"{folder}.git"
    subprocess.run([*GIT, "init", "-q", "--bare", str(remote)], check=True)
    clone = term / "class" / folder
    subprocess.run([*GIT, "clone", "-q", str(remote), str(clone)], check=True, capture_output=True)
    starter = clone / "assignments" / LESSON.id
    copy_package(LESSON.release, starter, MODULES)
    shutil.copyfile(LESSON.released_notebook(), starter / NOTEBOOK)
    _commit(clone, STARTED, "starter")
    return clone, starter


def _work(clone, folder, package, when, notebook=None):
    copy_package(package, folder, MODULES)
    if notebook:
        shutil.copyfile(notebook, folder / NOTEBOOK)
    return _commit(clone, when)


def build_term(term):
    """The guide's class: clones with history, a roster and an extension; ``{id: graded commit}``."""
    solved = LESSON.source_notebook()
    clone, starter = _clone(term, "mha-pe-ada")  # named as gh classroom clone names it
    shas = {"ada": _work(clone, starter, LESSON.solutions, ON_TIME, solved)}
    clone, starter = _clone(term, "cy")  # ada's code, handed in by cy
    shas["cy"] = _work(clone, starter, LESSON.solutions, ON_TIME)
    clone, starter = _clone(term, "jdoe")  # a catalogued bug
    (bug,) = [mutant for mutant in load_catalogue(LESSON.catalogue / "bugs.toml", "bug") if mutant.id == "sdpa-no-scaling"]
    shas["jdoe"] = _work(clone, starter, build(bug, term / "bug", LESSON), ON_TIME)
    shutil.copytree(starter, term / "class" / "jdoe (1)")  # a second download of the same student
    clone, _ = _clone(term, "two-copies")  # the stubs left in place, the work at the repository's top
    shas["two-copies"] = _work(clone, clone, LESSON.solutions, ON_TIME)
    clone, _ = _clone(term, "stubs")
    shas["stubs"] = subprocess.run(["git", "-C", str(clone), "rev-parse", "HEAD"], capture_output=True, text=True,
                                   check=True).stdout.strip()
    clone, starter = _clone(term, "late")
    shas["late"] = _work(clone, starter, LESSON.solutions, TWO_DAYS_LATE)
    clone, starter = _clone(term, "ext")
    shas["ext"] = _work(clone, starter, LESSON.solutions, TWO_DAYS_LATE)
    (term / "roster.csv").write_text("identifier,github_username,github_id,name\n" + "".join(
        f"{student},{student},{number},Student {number}\n" for number, student in enumerate(
            ("ada", "cy", "jdoe", "two-copies", "stubs", "late", "ext", "missing"), start=1)))
    (term / "extensions.csv").write_text("student,days\next,3\n")
    return shas


def _rows(path):
    with open(path, newline="") as handle:
        return {row["student"]: row for row in csv.DictReader(handle)}


@pytest.mark.slow
def test_a_term_as_the_guide_tells_it(tmp_path):
    from nbgrader.api import Gradebook

    from autograder.records import triage
    from autograder.records.results import load

    term = tmp_path / "term"
    class_dir = term / "class"
    shas = build_term(term)

    run_step("release", term)
    assert (term / "template" / ".github" / "workflows" / "classroom.yml").exists()
    assert (term / "autograder.zip").stat().st_size > 0

    out = run_step("grade", term)
    graded = term / "graded"
    first = _rows(graded / "gradebook.csv")
    assert set(first) == {"ada", "cy", "jdoe", "two-copies", "stubs", "late", "ext", "missing"}
    assert len({row["max_score"] for row in first.values()}) == 1  # one maximum for everyone
    top = float(first["ada"]["max_score"])
    records = {student: load(graded / "results" / f"{student}.json") for student in first}
    flags = {student: [reason.kind for reason in triage.reasons(record)] for student, record in records.items()}
    assert flags == {"ada": [], "cy": ["notebook_unused"], "jdoe": ["second_folder", "notebook_unused"],
                     "two-copies": ["files_elsewhere", "notebook_unused"], "stubs": ["stubs", "notebook_unused", "zero"],
                     "late": ["late", "notebook_unused"], "ext": ["notebook_unused"], "missing": ["no_submission"]}
    assert "needs a look: 7 of 8 student(s)" in out and "  missing: no submission" in out
    assert {student: records[student].handin.commit.sha for student in shas} == shas  # the commit graded, kept
    assert records["ada"].handin.folder == "mha-pe-ada" and records["jdoe"].handin.also == ("jdoe (1)",)
    assert records["late"].handin.late_days == 2 and records["late"].penalty == round(0.2 * top, 6)
    assert float(first["late"]["score"]) == float(first["ext"]["score"]) - 0.2 * top
    assert float(first["late"]["late_penalty"]) == round(0.2 * top, 6) and first["late"]["commit"] == shas["late"]
    assert float(first["two-copies"]["score"]) == float(first["ext"]["score"])  # graded on the student's own files
    assert float(first["missing"]["score"]) == float(first["stubs"]["score"]) == 0
    assert "Late by 2 day(s): 20% of the maximum" in (graded / "feedback" / "late.txt").read_text()
    assert json.loads((graded / "handin-options.json").read_text())["late_penalty"] == 10

    run_step("shards", term)
    merged = _rows(term / "merged" / "gradebook.csv")
    assert {student: row["score"] for student, row in merged.items()} == \
        {student: row["score"] for student, row in first.items()}
    sizes = [json.loads((term / f"shard-{index}" / "shard.json").read_text())["students"] for index in (1, 2)]
    assert sorted(len(students) for students in sizes) == [4, 4]  # even shards by default

    # The Gradescope zip, tried locally (step 4c): its own copy of the kit gives the student the grade step 4a gave
    # (the first folder, cy: on time, so their working tree is the commit graded).
    out = run_step("gradescope-local", term)
    gradescope = json.loads((term / "gradescope" / "results" / "results.json").read_text())
    assert gradescope["score"] == float(first["cy"]["score"]) > 0 and '"score"' in out
    assert gradescope["extra_data"]["sandbox"] in ("bwrap", "uid")

    run_step("similarity", term)
    check_similarity(graded)

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

    # Feedback returned (step 7): each clone's bare remote holds its student's feedback on the branch feedback.
    out = run_step("return-feedback", term)
    folders = {"ada": "mha-pe-ada", **{student: student for student in shas if student != "ada"}}
    for student, folder in folders.items():
        shown = subprocess.run(["git", "--git-dir", str(term / "remotes" / f"{folder}.git"), "show",
                                "feedback:FEEDBACK.md"], capture_output=True, text=True, check=True).stdout
        assert shown == (graded / "feedback" / f"{student}.md").read_text(), student
    assert "returned to 7 of 8" in out

    # Grades to the LMS (step 7b): Canvas's import format, the penalty taken off.
    run_step("export", term)
    with open(term / "canvas.csv", newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0][:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"] and len(rows[0]) == 6
    assert rows[1][0] == "Points Possible" and float(rows[1][5]) == float(final["ada"]["max_total"])
    canvas = {row[3]: float(row[5]) for row in rows[2:]}
    assert canvas == {student: float(row["total"]) for student, row in final.items()}
    assert canvas["late"] == canvas["ext"] - 0.2 * float(final["late"]["max_total"])
    assert float(final["late"]["late_penalty"]) == round(0.2 * top, 6) and float(final["ext"]["late_penalty"]) == 0

    # jdoe fixes the bug before the deadline, and the instructor pulls it (step 8): only jdoe is regraded, with the
    # term's hand-in options as the grade step gave them; ada keeps her manual grades.
    jdoe = class_dir / "jdoe"
    fixed = _work(jdoe, jdoe / "assignments" / LESSON.id, LESSON.solutions, "2026-12-01T12:00:00+00:00")
    kept = [student for student in first if student != "jdoe"]
    before = {student: (graded / "results" / f"{student}.json").read_text() for student in kept}
    out = run_step("regrade", term)
    assert "hand-in options of the last run" in out and "7 student(s) unchanged" in out, out
    assert {student: (graded / "results" / f"{student}.json").read_text() for student in kept} == before
    final = _rows(graded / "final_gradebook.csv")
    assert load(graded / "results" / "jdoe.json").handin.commit.sha == fixed
    assert float(final["jdoe"]["code"]) == float(final["ext"]["code"]) and final["ada"]["total"] == final["ada"]["max_total"]


def check_similarity(graded):
    """Step 4d, on the commits graded: the five who handed in the reference are one row of identical submissions,
    the bug beside them next; the stubs, the second folder and the student who handed in nothing are nowhere."""
    with open(graded / "similarity.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    first = rows[0]
    assert first["identical"] == "yes"
    assert sorted([first["student_a"], first["student_b"], *json.loads(first["same_as_a"])]) == [
        "ada", "cy", "ext", "late", "two-copies"]
    named = {row[key] for row in rows for key in ("student_a", "student_b")} | {
        student for row in rows for key in ("same_as_a", "same_as_b") if row[key] for student in json.loads(row[key])}
    assert "jdoe" in named and not named & {"stubs", "jdoe (1)", "missing", "mha-pe-ada"}
    assert (graded / "similarity" / "pair-001.html").is_file()
    assert "[similarity.md](similarity.md)" in (graded / "report.md").read_text()


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


@pytest.mark.slow
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
