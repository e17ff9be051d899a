"""The Classroom workflow's one pytest run and the payload it hands the grading reporter: its step's own command
line replayed on a released template (stubs, reference, a slip, files that cannot be imported), the payload read
the way classroom-resources/autograding-grading-reporter reads it, and the script's verdicts on logs it never got
to finish."""

import ast
import base64
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from autograder.commands import classroom_report
from autograder.commands.classroom import (NOTEBOOK_TOOLS, POINTS_PER_TEST, REPORT_SCRIPT, classroom_steps,
                                           workflow_packages, write_template)
from autograder.lesson.catalogue import copy_package
from lesson import LESSON, MODULES, SOLUTIONS

# The reporter's own check of its ``runners`` input (src/main.js): step ids, letters and digits, comma-separated.
REPORTER_RUNNERS = re.compile(r"^([a-zA-Z0-9]+,)*[a-zA-Z0-9]+$")
STATUSES = {"pass", "fail", "error"}


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    folder = tmp_path_factory.mktemp("payload") / "repo"
    write_template(folder, LESSON)
    return folder


@pytest.fixture(scope="module")
def solved(template, tmp_path_factory):
    folder = tmp_path_factory.mktemp("payload-solved") / "repo"
    shutil.copytree(template, folder)
    copy_package(SOLUTIONS, folder / "assignments" / LESSON.id, MODULES)
    return folder


def workflow_steps(folder):
    workflow = yaml.safe_load((folder / ".github" / "workflows" / "classroom.yml").read_text())
    return workflow["jobs"]["run-autograding-tests"]["steps"]


def reporter_payloads(folder, output):
    """What the reporter decodes from the environment the workflow gives it: ``{runner: payload}``."""
    reporter = workflow_steps(folder)[-1]
    assert reporter["uses"] == "classroom-resources/autograding-grading-reporter@v1"
    runners = reporter["with"]["runners"]
    assert REPORTER_RUNNERS.match(runners), runners
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    decoded = {}
    for runner in runners.split(","):
        value = reporter["env"][f"{runner.strip().upper()}_RESULTS"]
        step = re.fullmatch(r"\$\{\{\s*steps\.(\w+)\.outputs\.(\w+)\s*\}\}", value)
        assert step and step.groups() == (runner, "result"), value
        decoded[runner] = json.loads(base64.b64decode(outputs[step.group(2)], validate=True).decode("utf-8"))
    return decoded


def replay(folder, scratch):
    """Run the workflow's test step exactly as written (bash, in the repository, ``python`` first on PATH), and
    return the one payload the reporter reads, checked against the reporter's shape."""
    (step,) = [step for step in workflow_steps(folder) if step.get("id") == classroom_report.RUNNER]
    output = scratch / "github_output"
    output.write_text("")
    env = dict(os.environ, GITHUB_OUTPUT=str(output),
               PATH=os.pathsep.join((os.path.dirname(sys.executable), os.environ["PATH"])))
    done = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (payload,) = reporter_payloads(folder, output).values()
    assert_reporter_shape(payload)
    return payload


def assert_reporter_shape(payload):
    """The fields the reporter reads (its console table and its Classroom notice), as autograding-command-grader
    writes them."""
    assert payload["version"] == 1 and payload["status"] in STATUSES
    assert payload["max_score"] == sum(test["max_score"] for test in payload["tests"])
    for test in payload["tests"]:
        assert set(test) == {"name", "status", "score", "max_score", "message", "test_code", "filename", "line_no",
                             "duration"}
        assert test["status"] in STATUSES and test["line_no"] == 0 and isinstance(test["name"], str)
        assert test["score"] == (test["max_score"] if test["status"] == "pass" else 0)
    assert payload["status"] == ("pass" if all(test["status"] == "pass" for test in payload["tests"]) else "fail")


def collected_functions(folder):
    """The public test functions pytest collects in ``folder`` (each parametrized function once)."""
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q"], cwd=folder, capture_output=True,
                          text=True, timeout=300)
    return list(dict.fromkeys(line.split("[")[0] for line in done.stdout.splitlines() if "::" in line))


def verdicts(payload):
    return {test["name"]: test["status"] for test in payload["tests"]}


@pytest.mark.slow  # a whole public-test run of the template
def test_the_reference_earns_every_point_in_one_entry_per_public_test(solved, tmp_path):
    payload = replay(solved, tmp_path)
    steps = classroom_steps(LESSON)
    functions = collected_functions(solved)
    assert len(payload["tests"]) == len(functions) == len(steps) == 38
    assert [test["name"] for test in payload["tests"]] == [step.id for step in steps]
    assert sorted(functions) == sorted(step.node for step in steps)
    assert verdicts(payload) == {step.id: "pass" for step in steps}
    assert [test["score"] for test in payload["tests"]] == [POINTS_PER_TEST] * 38
    assert payload["max_score"] == sum(test["score"] for test in payload["tests"]) == 38
    assert payload["status"] == "pass"
    readme = " ".join((solved / "README.md").read_text().split())
    assert "gives each public test function 1 point, 38 in all" in readme and "not Jupyter" in readme


@pytest.mark.slow  # a whole public-test run of the template
def test_the_stubs_earn_nothing(template, tmp_path):
    payload = replay(template, tmp_path)
    assert verdicts(payload) == {step.id: "fail" for step in classroom_steps(LESSON)}
    assert sum(test["score"] for test in payload["tests"]) == 0 and payload["max_score"] == 38
    assert payload["status"] == "fail"
    first = payload["tests"][0]
    assert first["test_code"] == f"python -m pytest -q {classroom_steps(LESSON)[0].node}"
    assert first["message"] == ("pe-table-shape-and-dtype: NotImplementedError: get_positional_encoding is not "
                                "implemented yet")


@pytest.mark.slow  # a whole public-test run of the template
def test_one_slip_costs_one_test_function(solved, tmp_path):
    """A submission right but for one mistake loses that function's point, not a whole file's."""
    slipped = tmp_path / "slipped"
    shutil.copytree(solved, slipped)
    heads = slipped / "assignments" / LESSON.id / "heads.py"
    heads.write_text(heads.read_text().replace("if x.dim() != 4:", "if False:"))  # combine_heads accepts any rank
    payload = replay(slipped, tmp_path)
    assert [name for name, status in verdicts(payload).items() if status != "pass"] == [
        "heads-split-rejects-indivisible-width-and-wrong-rank"]
    assert sum(test["score"] for test in payload["tests"]) == 37


@pytest.mark.slow  # a whole public-test run of the template
def test_a_test_file_that_cannot_be_imported_costs_its_own_tests_only(solved, tmp_path):
    """pytest would stop at a collection error, or at a missing file named on its command line: the run goes on,
    and those files' tests are errors that say why."""
    broken = tmp_path / "broken"
    shutil.copytree(solved, broken)
    tests = broken / "assignments" / LESSON.id / "tests"
    (tests / "test_heads.py").unlink()
    with open(tests / "test_positional_encoding.py", "a") as file:
        file.write("\ndef (\n")
    payload = replay(broken, tmp_path)
    steps = classroom_steps(LESSON)
    expected = {"test_positional_encoding.py": "error", "test_heads.py": "error", "test_attention.py": "pass"}
    assert verdicts(payload) == {step.id: expected[step.test_file] for step in steps}
    messages = {test["filename"].rsplit("/", 1)[1]: test["message"] for test in payload["tests"]}
    assert messages["test_heads.py"].endswith("assignments/mha_pe/tests/test_heads.py could not be imported: the "
                                              "file is missing")
    assert "test_positional_encoding.py could not be imported:" in messages["test_positional_encoding.py"]
    assert messages["test_positional_encoding.py"].endswith("SyntaxError: invalid syntax")


TESTS = [{"name": "a", "node": "t/test_x.py::test_a", "points": 1},
         {"name": "b", "node": "t/test_x.py::test_b", "points": 2},
         {"name": "c", "node": "t/test_x.py::test_c", "points": 1}]


def test_a_run_cut_short_counts_what_finished():
    """A timeout (or a crash) after some cases: those count, the one running and the rest are errors saying so."""
    records = [{"node": "t/test_x.py::test_a[1]", "started": True},
               {"node": "t/test_x.py::test_a[1]", "outcome": "passed", "message": "", "seconds": 0.5},
               {"node": "t/test_x.py::test_a[2]", "started": True},
               {"node": "t/test_x.py::test_a[2]", "outcome": "skipped", "message": "", "seconds": 0.25},
               {"node": "t/test_x.py::test_b", "started": True}]
    payload = classroom_report.payload(TESTS, records, "the run stopped after its 8 minutes")
    assert_reporter_shape(payload)
    assert verdicts(payload) == {"a": "pass", "b": "error", "c": "error"}
    assert [test["message"] for test in payload["tests"]] == [
        "", "b: still running when the run stopped after its 8 minutes",
        "c: not run: the run stopped after its 8 minutes"]
    assert [test["score"] for test in payload["tests"]] == [1, 0, 0] and payload["max_score"] == 4
    assert payload["tests"][0]["duration"] == 750


def test_a_function_passes_only_when_every_case_passes():
    records = [{"node": "t/test_x.py::test_a[1]", "outcome": "passed", "message": "", "seconds": 0},
               {"node": "t/test_x.py::test_a[2]", "outcome": "failed", "message": "AssertionError: 2", "seconds": 0},
               {"node": "t/test_x.py::test_b", "outcome": "passed", "message": "", "seconds": 0},
               {"node": "t/test_x.py::test_b", "outcome": "failed", "message": "teardown broke", "seconds": 0}]
    payload = classroom_report.payload(TESTS, records)
    assert verdicts(payload) == {"a": "fail", "b": "fail", "c": "error"}
    assert [test["message"] for test in payload["tests"]] == [
        "a: AssertionError: 2", "b: teardown broke", "c: not run: pytest did not collect it"]
    assert classroom_report.encode(payload) == base64.b64encode(json.dumps(payload).encode()).decode()


def test_the_workflow_installs_only_what_the_public_tests_import_with_the_kits_pins(template):
    """No Jupyter on every push: the public tests import nothing beyond the workflow's requirements."""
    requirements = (template / ".github" / "classroom" / "requirements.txt").read_text().splitlines()
    pinned = [line for line in requirements if not line.startswith("#")]
    student = set((template / "requirements.txt").read_text().splitlines())
    assert set(pinned) <= student and len(pinned) == len(workflow_packages(LESSON)) == 4
    assert not {name.split("==")[0] for name in NOTEBOOK_TOOLS} & {name.split("==")[0] for name in pinned}
    tests = template / "assignments" / LESSON.id / "tests"
    imported = set()
    for path in tests.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level:
                imported.add(node.module.split(".")[0])
    own = {LESSON.id} | {path.stem for path in tests.glob("*.py")}
    assert imported - set(sys.stdlib_module_names) - own <= set(workflow_packages(LESSON))
    step = next(step for step in workflow_steps(template) if step.get("uses", "").startswith("actions/setup-python"))
    assert step["with"]["cache"] == "pip"
    assert (template / step["with"]["cache-dependency-path"]).read_text() == "\n".join(requirements) + "\n"


def test_the_template_ships_the_script_as_the_kit_has_it(template):
    assert (template / REPORT_SCRIPT).read_text() == open(classroom_report.__file__).read()
    assert f"python {REPORT_SCRIPT} " in [step for step in workflow_steps(template)
                                          if step.get("id") == classroom_report.RUNNER][0]["run"]
