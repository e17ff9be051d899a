"""One class, every sandbox and deployment, one outcome: the grade is a pure function of the submission.

The same class (the reference, the stubs, a catalogued bug and a hostile submission, each with a notebook) is graded
under bubblewrap, under ``--sandbox uid`` and ``--sandbox isolated`` where bubblewrap is refused, in 2 shards then
merged, and by the Gradescope zip's ``run_autograder`` with bubblewrap working and refused; every student's
per-check outcomes must be identical in all of them. A run without bubblewrap happens in a private mount namespace
in which bwrap fails (test_hostile's prelude): nothing outside it changes. Modes this machine lacks skip and say why.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

from autograder import paths
from autograder.commands.gradescope import build_package
from autograder.errors import KitError
from autograder.intake.naming import result_path
from autograder.lesson.catalogue import build, copy_package, load_catalogue
from autograder.sandbox.isolation import choose_sandbox
from lesson import CATALOGUE, LESSON, MODULES, NOTEBOOK, RELEASE, SOLUTIONS
from test_hostile import _without_bubblewrap

pytestmark = pytest.mark.slow  # grades a class, builds a venv or runs the demo

STUDENTS = ("bug", "forger", "reference", "stubs")


def outcomes(record):
    """``{check id: status}`` of a record or a results.json (a pending written answer has no status)."""
    return {test.get("extra_data", {}).get("id") or test["name"]: test.get("status", "pending")
            for test in record["tests"]}


def _kit(*args, cwd=paths.REPO_ROOT, env=None, prelude_root=None):
    """Run ``python -m autograder ARGS`` (bubblewrap refused when ``prelude_root`` is given); its stdout."""
    command = [sys.executable, "-m", "autograder", *args]
    if prelude_root is not None:
        command = ["unshare", "-m", "bash", "-c", _without_bubblewrap(Path(tempfile.mkdtemp(dir=prelude_root))),
                   "no-bwrap", *command]
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def _class_outcomes(out):
    return {student: outcomes(json.loads(result_path(out, student).read_text())) for student in STUDENTS}


@pytest.fixture(scope="module")
def world():
    """A folder every user may pass through, the class in it, and bubblewrap's outcomes, the ones to match."""
    try:
        choose_sandbox("bwrap")
    except KitError as error:
        pytest.skip(f"needs bubblewrap for the outcome every other mode is compared with: {error}")
    root = Path(tempfile.mkdtemp(prefix="mha-pe-modes-"))
    root.chmod(0o755)
    try:
        class_dir = root / "class"
        notebook = LESSON.source_notebook()
        copy_package(SOLUTIONS, class_dir / "reference", MODULES)
        copy_package(RELEASE, class_dir / "stubs", MODULES)
        build(load_catalogue(CATALOGUE / "bugs.toml", "bug")[0], class_dir / "bug", LESSON)
        forger = next(entry for entry in load_catalogue(CATALOGUE / "hostile.toml", "hostile") if entry.id == "forger")
        build(forger, class_dir / "forger", LESSON)
        for student in STUDENTS:
            shutil.copyfile(LESSON.released_notebook() if student == "stubs" else notebook,
                            class_dir / student / NOTEBOOK)
        _kit("grade", str(class_dir), "--out", str(root / "bwrap"), "--sandbox", "bwrap", "--jobs", "2")
        expected = _class_outcomes(root / "bwrap")
        assert sorted(expected) == list(STUDENTS)
        # The class is a real test: full marks somewhere, nothing somewhere, and a bug that fails some checks.
        assert set(expected["reference"].values()) <= {"passed", "pending", "skipped"}
        assert "passed" not in expected["stubs"].values()
        assert "failed" in expected["bug"].values() and "passed" in expected["bug"].values()
        yield root, class_dir, expected
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _needs_uid():
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("confined workers need root, and unshare to refuse bubblewrap in a private mount namespace")


@pytest.mark.parametrize("mode", ["uid", "isolated"])
def test_bubblewrap_refused_grades_as_bubblewrap(world, mode):
    """``uid`` asked for, and ``isolated`` (the strongest that works: uid once bubblewrap is refused)."""
    _needs_uid()
    root, class_dir, expected = world
    out = root / f"out-{mode}"
    _kit("grade", str(class_dir), "--out", str(out), "--sandbox", mode, "--jobs", "2", prelude_root=root)
    for student in STUDENTS:
        assert json.loads(result_path(out, student).read_text())["extra_data"]["sandbox"] == "uid"
    assert _class_outcomes(out) == expected


def test_two_shards_merged_grade_as_one_run(world):
    root, class_dir, expected = world
    shards = []
    for index in (1, 2):
        shards.append(root / f"shard-{index}")
        _kit("grade", str(class_dir), "--out", str(shards[-1]), "--sandbox", "bwrap", "--shard", f"{index}/2")
    _kit("merge", *map(str, shards), "--out", str(root / "merged"))
    assert _class_outcomes(root / "merged") == expected


@pytest.mark.parametrize("bubblewrap", ["working", "refused"])
def test_the_gradescope_zip_grades_as_bubblewrap(world, bubblewrap):
    root, class_dir, expected = world
    if bubblewrap == "refused":
        _needs_uid()
    gradescope = root / f"gradescope-{bubblewrap}"
    archive = build_package(root / f"autograder-{bubblewrap}.zip")
    with zipfile.ZipFile(archive) as opened:
        opened.extractall(gradescope / "source")
    for name in ("setup.sh", "run_autograder"):
        (gradescope / "source" / name).chmod(0o755)
    env = dict(os.environ, AUTOGRADER_ROOT=str(gradescope), AUTOGRADER_PYTHON=sys.executable)
    found = {}
    for student in STUDENTS:
        shutil.rmtree(gradescope / "submission", ignore_errors=True)
        shutil.rmtree(gradescope / "results", ignore_errors=True)
        shutil.copytree(class_dir / student, gradescope / "submission")
        (gradescope / "results").mkdir()
        command = ["bash", str(gradescope / "source" / "run_autograder")]
        if bubblewrap == "refused":
            command = ["unshare", "-m", "bash", "-c", _without_bubblewrap(Path(tempfile.mkdtemp(dir=root))),
                       "no-bwrap", *command]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        results = json.loads((gradescope / "results" / "results.json").read_text())
        assert results["extra_data"]["sandbox"] == ("bwrap" if bubblewrap == "working" else "uid")
        found[student] = outcomes(results)
    assert found == expected
