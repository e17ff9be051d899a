"""Runs the public tests once and gives GitHub Classroom's grading reporter one payload holding every test.

The Classroom template ships this file as ``.github/classroom/classroom_report.py``; its workflow runs
``python .github/classroom/classroom_report.py`` and hands the result to
``classroom-resources/autograding-grading-reporter``. It reads ``tests.json`` beside it (each public test
function: its name, its pytest node id, its points), runs pytest once on their files, and appends
``result=<payload>`` to the file ``$GITHUB_OUTPUT`` names (prints it without one). The payload is base64 of
``{"version": 1, "status", "max_score", "tests": [{"name", "status", "score", "max_score", "message",
"test_code", "filename", "line_no", "duration"}]}``: the form ``autograding-command-grader`` writes for its one
test, here one entry per test function. The reporter adds up the tests' ``score`` for Classroom's points and
shows, per runner, the share of tests passed times ``max_score`` (the same numbers while every test is worth
the same). A function passes when all of its cases pass; one whose file could not be imported, or that had not
finished when the time ran out, is an error with the reason. Standard library only: it runs before anything
else is importable, and as a pytest plugin (``-p classroom_report``) in the one pytest run.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUNNER = "pytest"  # the reporter's runner name; it reads the payload from PYTEST_RESULTS
_OUTCOMES = "CLASSROOM_REPORT_OUTCOMES"  # the plugin's log file, named by the parent for the child pytest


# The plugin: runs inside the child pytest and logs each case's outcome as one JSON line, as it happens, so what
# finished before a timeout or a crash is still counted.
def _log(record: dict) -> None:
    path = os.environ.get(_OUTCOMES)
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(json.dumps(record) + "\n")


def _message(report) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        text = crash.message
    else:  # a collection error's text is its traceback: its "E" lines say what went wrong
        lines = str(report.longrepr or "").splitlines()
        text = " ".join(line[1:] for line in lines if line.startswith("E ")) or " ".join(lines[-1:])
    return " ".join(text.split())[:300]


def pytest_runtest_logstart(nodeid: str, location) -> None:
    _log({"node": nodeid, "started": True})


def pytest_runtest_logreport(report) -> None:
    if report.failed or report.when == "call" or (report.when == "setup" and report.skipped):
        _log({"node": report.nodeid, "outcome": report.outcome, "message": _message(report) if report.failed else "",
              "seconds": report.duration})


def pytest_collectreport(report) -> None:
    if report.failed:
        _log({"node": report.nodeid, "outcome": "error", "message": _message(report), "collect": True})


# The parent: runs the child pytest, then turns its log into the payload.
def read_outcomes(path: Path) -> list[dict]:
    """The plugin's records, in order (a last line cut short by a kill is dropped)."""
    records = []
    for line in path.read_text(encoding="utf-8").splitlines() if path.is_file() else ():
        try:
            records.append(json.loads(line))
        except ValueError:
            pass
    return records


def payload(tests: list[dict], records: list[dict], stopped: str = "") -> dict:
    """The reporter's payload: one entry per function of ``tests`` (``name``, ``node``, ``points``), from the
    plugin's ``records``; ``stopped`` says why the run ended early (a timeout, a crash), for what it never ran."""
    cases: dict[str, list[dict]] = {}
    broken: dict[str, str] = {}  # a test file that failed to import: its message
    started = ""
    for record in records:
        if record.get("collect"):
            broken[record["node"].split("::")[0]] = record["message"]
        elif record.get("started"):
            started = record["node"]
        else:
            cases.setdefault(record["node"].split("[")[0], []).append(record)
            started = "" if record["node"] == started else started
    entries = []
    for test in tests:
        done, file = cases.get(test["node"], []), test["node"].split("::")[0]
        failed = [case for case in done if case["outcome"] == "failed"]
        if done and not failed:
            status, message = "pass", ""
        elif failed:
            status, message = "fail", failed[0]["message"]
        else:
            status = "error"
            message = (f"{file} could not be imported: {broken[file]}" if file in broken else
                       f"still running when {stopped}" if started.split("[")[0] == test["node"] else
                       f"not run: {stopped or 'pytest did not collect it'}")
        entries.append({"name": test["name"], "status": status, "score": test["points"] if status == "pass" else 0,
                        "max_score": test["points"], "message": f"{test['name']}: {message}" if message else "",
                        "test_code": "" if status == "pass" else f"python -m pytest -q {test['node']}",
                        "filename": file, "line_no": 0,
                        "duration": round(1000 * sum(case.get("seconds", 0) for case in done))})
    return {"version": 1, "status": "pass" if all(entry["status"] == "pass" for entry in entries) else "fail",
            "max_score": sum(test["points"] for test in tests), "tests": entries}


def encode(result: dict) -> str:
    """The payload as the reporter decodes it: base64 of its JSON."""
    return base64.b64encode(json.dumps(result).encode()).decode()


def run(root: Path, tests: list[dict], minutes: float) -> dict:
    """Run pytest once on the files of ``tests`` in ``root`` (at most ``minutes``) and return the payload."""
    files = list(dict.fromkeys(test["node"].split("::")[0] for test in tests))
    present = [file for file in files if (root / file).is_file()]  # pytest stops at once on a missing path
    with tempfile.TemporaryDirectory() as scratch:
        log = Path(scratch) / "outcomes.jsonl"
        env = dict(os.environ, **{_OUTCOMES: str(log)},
                   PYTHONPATH=os.pathsep.join(filter(None, (str(HERE), os.environ.get("PYTHONPATH")))))
        # A file that fails to import costs its own tests, not the run.
        command = [sys.executable, "-m", "pytest", "-p", Path(__file__).stem, "--continue-on-collection-errors",
                   *present]
        stopped = ""
        try:
            done = subprocess.run(command, cwd=root, env=env, timeout=60 * minutes)
            if done.returncode not in (0, 1):
                stopped = f"pytest stopped with exit code {done.returncode}"
        except subprocess.TimeoutExpired:
            stopped = f"the run stopped after its {minutes:g} minutes"
        records = read_outcomes(log)
    records += [{"node": file, "outcome": "error", "message": "the file is missing", "collect": True}
                for file in files if file not in present]
    return payload(tests, records, stopped)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the public tests once; write the Classroom reporter's payload.")
    parser.add_argument("--minutes", type=float, default=8, help="time limit of the pytest run (default 8)")
    arguments = parser.parse_args(argv)
    started = time.monotonic()
    tests = json.loads((HERE / "tests.json").read_text(encoding="utf-8"))["tests"]
    result = run(HERE.parents[1], tests, arguments.minutes)
    earned = sum(entry["score"] for entry in result["tests"])
    print(f"Classroom points: {earned}/{result['max_score']} ({sum(e['status'] == 'pass' for e in result['tests'])} "
          f"of {len(tests)} test functions passed, {time.monotonic() - started:.0f} s)")
    line = f"result={encode(result)}\n"
    if os.environ.get("GITHUB_OUTPUT"):
        with open(os.environ["GITHUB_OUTPUT"], "a", encoding="utf-8") as output:
            output.write(line)
    else:
        sys.stdout.write(line)
    return 0  # the payload is written: the reporter, not this step, marks the run failed when a test fails


if __name__ == "__main__":
    sys.exit(main())
