"""Run an assignment's released public tests (plain pytest, in a child process) against any copy of its package.

The kit uses this to show that the public tests pass on the reference
solutions and fail cleanly on the stubs; students get the same tests and run
them with ``pytest``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import KitError
from .assignment import Assignment
from .cpu_limited import machine_limits, run_limited

# The limit is CPU time, scaled to the work: pytest and torch imported once, then each package's session (about
# 0.6 CPU seconds each on the kit's lesson, 103 packages in 68 s; these are 20x that and more). A busy machine
# slows the wall clock, never the CPU time, so no number of busy neighbours reaches it (cpu_limited.py).
START_CPU_SECONDS = 60.0
CPU_SECONDS_PER_PACKAGE = 15.0


def cpu_budget(packages: int) -> float:
    """The CPU seconds one child may use to run ``packages`` packages' public tests."""
    return START_CPU_SECONDS + CPU_SECONDS_PER_PACKAGE * packages


@dataclass(frozen=True)
class PublicRun:
    """Outcome of one public-test run: ``outcomes`` maps test id to passed/failed/error/skipped, ``messages`` each
    failed test's message (what a student reads first)."""

    outcomes: dict
    exit_code: int
    messages: dict = field(default_factory=dict)

    def count(self, outcome):
        return sum(1 for value in self.outcomes.values() if value == outcome)


def _outcome(case):
    for tag, outcome in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
        if case.find(tag) is not None:
            return outcome
    return "passed"


def _read_report(report):
    """``(outcomes, messages)`` from a junit XML report."""
    outcomes, messages = {}, {}
    if Path(report).exists():
        for case in ET.parse(report).iter("testcase"):
            test_id = f"{case.get('classname')}::{case.get('name')}"
            outcomes[test_id] = _outcome(case)
            for tag in ("failure", "error"):
                if case.find(tag) is not None:
                    messages[test_id] = case.find(tag).get("message") or ""
    return outcomes, messages


def run_public_tests(package_parent: str | Path, assignment: Assignment, tests_dir: str | Path | None = None,
                     cpu_seconds: float | None = None) -> PublicRun:
    """Run ``assignment``'s public tests with ``import <package>`` resolving inside ``package_parent`` (the
    tests' conftest reads the folder from ``assignment.package_variable``), limited as one package's run
    (:func:`cpu_budget`; ``cpu_seconds``: another CPU limit)."""
    tests_dir = Path(tests_dir or assignment.release / "tests")
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.xml"
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        env[assignment.package_variable] = str(Path(package_parent).resolve())
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}"]
        completed = run_limited(command + ["--rootdir", str(tests_dir), str(tests_dir)],
                                machine_limits(cpu_seconds or cpu_budget(1)), "the public tests", env=env)
        outcomes, messages = _read_report(report)
    return PublicRun(outcomes=outcomes, exit_code=completed.returncode, messages=messages)


def run_public_tests_many(package_parents: list[str | Path], assignment: Assignment,
                          tests_dir: str | Path | None = None, cpu_seconds: float | None = None
                          ) -> dict[str, PublicRun]:
    """``{folder: PublicRun}``: ``assignment``'s public tests against each folder holding its package, all in one
    child process (a pytest session each, torch imported once: a fraction of a second per folder), limited in
    CPU time by the number of folders (:func:`cpu_budget`; ``cpu_seconds``: another CPU limit), never by
    how busy the machine is."""
    tests_dir = Path(tests_dir or assignment.release / "tests").resolve()
    folders = [str(Path(folder).resolve()) for folder in package_parents]
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "spec.json"
        spec.write_text(json.dumps({"tests": str(tests_dir), "folders": folders, "out": tmp,
                                    "package": assignment.id, "variable": assignment.package_variable}))
        done = run_limited([sys.executable, "-m", "autograder.lesson.public_tests", str(spec)],
                           machine_limits(cpu_seconds or cpu_budget(len(folders))),
                           f"the public tests of {len(folders)} package(s)",
                           env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise KitError(f"the public tests' child process failed (exit {done.returncode}): {last[:300]}")
        runs = {}
        for index, folder in enumerate(folders):
            outcomes, messages = _read_report(Path(tmp) / f"{index}.xml")
            code = json.loads((Path(tmp) / f"{index}.code").read_text())
            runs[folder] = PublicRun(outcomes=outcomes, exit_code=code, messages=messages)
    return runs


def uncaught_by_public_tests(assignment: Assignment, bugs: list, jobs: int = 1) -> list[str]:
    """The ids of ``bugs`` (catalogue entries) that no public test catches: every public test (the lesson's, in its
    solutions' ``tests``) that passes on the reference passes on the bug too. ``jobs`` child processes share them
    (:func:`run_public_tests_many`: a pytest session per bug); the bugs are the instructor's own, so no sandbox."""
    from concurrent.futures import ThreadPoolExecutor

    from .catalogue import build

    if not bugs:
        return []
    tests_dir = assignment.solutions / "tests"
    with tempfile.TemporaryDirectory(prefix="public-") as tmp:
        folders = {"": assignment.solutions.parent}  # the reference: the folder holding the package
        for bug in bugs:
            package = build(bug, Path(tmp) / bug.id / assignment.id, assignment)
            for extra in assignment.solutions.glob("*.py"):  # __init__.py and any file that is no student's
                if extra.stem not in assignment.contract.modules:
                    shutil.copyfile(extra, package / extra.name)
            folders[bug.id] = Path(tmp) / bug.id
        shares = [share for share in (list(folders.values())[start::max(jobs, 1)] for start in range(max(jobs, 1)))
                  if share]
        with ThreadPoolExecutor(len(shares)) as pool:  # each thread waits on its own child process
            done = list(pool.map(lambda share: run_public_tests_many(share, assignment, tests_dir=tests_dir), shares))
    runs = {key: run for share in done for key, run in share.items()}
    runs = {name: runs[str(Path(folder).resolve())] for name, folder in folders.items()}
    passing = {test for test, outcome in runs[""].outcomes.items() if outcome == "passed"}
    return [bug.id for bug in bugs if all(runs[bug.id].outcomes.get(test) == "passed" for test in passing)]


def _run_in_turn(spec_path):
    """The child of :func:`run_public_tests_many`: one pytest session per folder, forgetting the previous
    folder's package, test modules and conftest (which puts the folder on ``sys.path``) in between."""
    import pytest

    spec = json.loads(Path(spec_path).read_text())
    tests_dir, base_path = spec["tests"], list(sys.path)
    for index, folder in enumerate(spec["folders"]):
        for name in [name for name in sys.modules if name.split(".")[0] in (spec["package"], "conftest")
                     or name.startswith("test_")]:
            del sys.modules[name]
        sys.path[:] = base_path
        os.environ[spec["variable"]] = folder
        report = Path(spec["out"]) / f"{index}.xml"
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            code = pytest.main(["-q", "-p", "no:cacheprovider", f"--junitxml={report}", "--rootdir", tests_dir,
                                tests_dir])
        (Path(spec["out"]) / f"{index}.code").write_text(json.dumps(int(code)))


if __name__ == "__main__":
    _run_in_turn(sys.argv[1])
