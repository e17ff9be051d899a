"""``--sandbox uid`` (confined workers, where bubblewrap is refused) grades exactly as bubblewrap does: the reference
with its notebook, forked from a warm zygote and one process per worker (``--no-fork``), with nothing a
submission starts left behind. Each uid run is the ``grade`` command in a private mount namespace in which bwrap
fails and the runtime is made passable (as test_hostile's confined run does): nothing outside it changes."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from autograder import paths
from autograder.errors import KitError
from autograder.lesson.catalogue import copy_package
from autograder.sandbox.isolation import choose_sandbox
from lesson import LESSON, MODULES, NOTEBOOK, RELEASE, SOLUTIONS
from test_hostile import DAEMON, _alive_with, _without_bubblewrap

pytestmark = pytest.mark.slow  # grades a class, builds a venv or runs the demo


@pytest.fixture
def root():
    """A folder every user may pass through (the judge's scratch lies in the system's temporary folder anyway)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("confined workers need root, and unshare to make bubblewrap fail in a private mount namespace")
    folder = Path(tempfile.mkdtemp(prefix="mha-pe-uid-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _grade_uid(root, class_dir, out, *flags):
    done = subprocess.run(
        ["unshare", "-m", "bash", "-c", _without_bubblewrap(Path(tempfile.mkdtemp(dir=root))), "confined", sys.executable, "-m", "autograder",
         "grade", str(class_dir), "--out", str(out), "--sandbox", "uid", *flags],
        cwd=paths.REPO_ROOT, capture_output=True, text=True, timeout=900)
    if done.returncode == 2 and "does not work here" in done.stderr:
        pytest.skip(f"confined workers do not work here: {done.stderr.strip()[-300:]}")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def _record(out, student):
    return json.loads((out / "results" / f"{student}.json").read_text())


def _outcomes(out, student):
    """``{test id: status}`` of a student's record (a pending written answer has no status: ``pending``)."""
    return {test.get("extra_data", {}).get("id") or test["name"]: test.get("status", "pending")
            for test in _record(out, student)["tests"]}


def test_the_reference_with_its_notebook_grades_under_uid_exactly_as_under_bwrap(root):
    """Before each worker had its own copy, the notebook's worker took the one staged copy from the code's worker,
    whose checks then all read "attention.py is missing" (3/137 instead of 124/137)."""
    try:
        choose_sandbox("bwrap")
    except KitError as error:
        pytest.skip(f"needs bubblewrap for the outcome to compare with: {error}")
    class_dir = root / "class"
    for student in ("ada", "bob"):  # two students: forked workers of more than one student, and their ends
        folder = copy_package(SOLUTIONS, class_dir / student, MODULES)
        shutil.copyfile(LESSON.source_notebook(), folder / NOTEBOOK)
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(class_dir), "--out", str(root / "bwrap"),
                           "--sandbox", "bwrap"], cwd=paths.REPO_ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    expected = _outcomes(root / "bwrap", "ada")
    assert list(expected.values()).count("passed") > 0 and _record(root / "bwrap", "ada")["extra_data"]["notes"] == []
    for label, flags in (("forked", ()), ("no-fork", ("--no-fork",))):
        out = root / label
        _grade_uid(root, class_dir, out, *flags)
        for student in ("ada", "bob"):
            record = _record(out, student)
            assert record["extra_data"]["sandbox"] == "uid"
            assert record["extra_data"]["notes"] == [], (label, record["extra_data"]["notes"])  # forked: no fallback
            assert _outcomes(out, student) == expected, (label, student)
            assert record["score"] == _record(root / "bwrap", student)["score"]


def test_nothing_a_forked_confined_worker_starts_outlives_its_grading(root):
    """A submission whose import leaves a daemon (double fork, setsid: out of its worker's process tree) that
    would rewrite the records later: its user's processes are all ended with its worker."""
    marker = f"27182.8{int.from_bytes(os.urandom(3), 'big'):08d}"
    class_dir, out = root / "class", root / "out"
    heads = copy_package(RELEASE, class_dir / "a-daemon", MODULES) / "heads.py"
    heads.write_text(DAEMON.format(marker=marker, out=out) + heads.read_text())
    copy_package(SOLUTIONS, class_dir / "b-honest", MODULES)
    try:
        _grade_uid(root, class_dir, out, "--skip-notebook")
        assert _alive_with(marker) == []
        daemon, honest = _record(out, "a-daemon"), _record(out, "b-honest")
        assert "DAEMON-STARTED" in json.dumps(daemon), "no daemon: the test proves nothing"
        assert daemon["score"] == 0 and honest["score"] == honest["extra_data"]["max_score"] > 0
        assert daemon["extra_data"]["notes"] == [] and honest["extra_data"]["notes"] == []  # forked, not fallen back
    finally:
        for pid in _alive_with(marker):
            os.kill(pid, 9)
