"""Run the released public tests (plain pytest, in a child process) against any ``mha_pe`` package.

The kit uses this to show that the public tests pass on the reference
solutions and fail cleanly on the stubs; students get the same tests and run
them with ``pytest``.
"""

import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from . import paths


@dataclass(frozen=True)
class PublicRun:
    """Outcome of one public-test run: ``outcomes`` maps test id to passed/failed/error/skipped."""

    outcomes: dict
    exit_code: int

    def count(self, outcome):
        return sum(1 for value in self.outcomes.values() if value == outcome)


def _outcome(case):
    for tag, outcome in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
        if case.find(tag) is not None:
            return outcome
    return "passed"


def run_public_tests(package_parent, tests_dir=None, timeout=300):
    """Run the public tests with ``import mha_pe`` resolving inside ``package_parent``."""
    tests_dir = Path(tests_dir or paths.ASSIGNMENTS_DIR / paths.ASSIGNMENT_ID / "tests")
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.xml"
        env = dict(os.environ, MHA_PE_PATH=str(Path(package_parent).resolve()), PYTHONDONTWRITEBYTECODE="1")
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}"]
        completed = subprocess.run(
            command + ["--rootdir", str(tests_dir), str(tests_dir)],
            env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
        )
        outcomes = {}
        if report.exists():
            for case in ET.parse(report).iter("testcase"):
                outcomes[f"{case.get('classname')}::{case.get('name')}"] = _outcome(case)
    return PublicRun(outcomes=outcomes, exit_code=completed.returncode)
