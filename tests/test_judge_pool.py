"""``--jobs N``: the pool of judge processes, run with a fake judge (no torch, no workers) so that a judge's
death can be staged: which student kills it decides everything, never how fast anything runs."""

import os
import sys
import textwrap

import pytest

from autograder.commands.judge_loop import needs_retry
from autograder.commands.judge_pool import grade_in_parallel
from autograder.commands.planning import Task
from autograder.intake.naming import result_path
from autograder.records.results import GraderFailure, load
from autograder.sandbox.isolation import Sandbox
from lesson import LESSON

# Reads the pool's tasks like `python -m autograder _judge MANIFEST`; logs "judge-number student" as it takes each.
# "flaky" ends its judge the first time it is taken (a clean exit), "doomed" every time (a crash); "unwritten" is
# reported done without a result file; everyone else gets 1 of 1.
FAKE_JUDGE = textwrap.dedent("""
    import json, os, sys
    from pathlib import Path
    from autograder.commands.planning import Task
    from autograder.intake.naming import result_path
    from autograder.records.results import SubmissionResult, TestResult, save

    state = Path(sys.argv[1])
    out_dir = json.loads(Path(sys.argv[2]).read_text())["out_dir"]
    number = 1
    while True:  # this judge's number: the first free one (claimed atomically)
        try:
            os.close(os.open(state / f"judge-{number}", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            break
        except FileExistsError:
            number += 1
    for line in sys.stdin:
        task = Task.from_json(json.loads(line))
        with open(state / "log", "a") as log:
            log.write(f"{number} {task.student}\\n")
        if task.student == "flaky" and not (state / "flaky-ended-a-judge").exists():
            (state / "flaky-ended-a-judge").touch()
            sys.exit(0)
        if task.student == "doomed":
            os._exit(3)
        if task.student != "unwritten":
            save(SubmissionResult(task.student, (TestResult("t", "g", 1, 1, "passed"),),
                                  fingerprint=task.fingerprint), result_path(out_dir, task.student))
        print(json.dumps({"done": task.student}), flush=True)
""")


def _pool(tmp_path, students, jobs):
    """Grade ``students`` on ``jobs`` fake judges; ``(results by student, [(judge number, student)] taken)``."""
    state = tmp_path / "state"
    state.mkdir()
    script = tmp_path / "fake_judge.py"
    script.write_text(FAKE_JUDGE)
    tasks = [Task(student, str(tmp_path / "class" / student), f"fp-{student}") for student in students]
    done = []
    grade_in_parallel(tasks, Sandbox("none", "a test"), tmp_path / "out", jobs, done.append, LESSON,
                      judge_command=[sys.executable, str(script), str(state)])
    assert sorted(result.student for result in done) == sorted(students), "one result per student, exactly"
    taken = [tuple(line.split(" ", 1)) for line in (state / "log").read_text().splitlines()]
    return {result.student: result for result in done}, [(int(judge), student) for judge, student in taken]


def test_a_dead_judges_students_are_graded_once_more_by_a_fresh_judge_then_failed(tmp_path):
    results, taken = _pool(tmp_path, ["unwritten", "alice", "flaky", "bob", "doomed"], jobs=1)

    def judges(student):
        return [judge for judge, name in taken if name == student]

    # flaky ended its first judge, and a fresh one graded it
    assert len(set(judges("flaky"))) == 2 and results["flaky"].score == results["flaky"].max_score == 1
    assert results["flaky"].grader_failures == ()
    # the students queued behind it were graded, once each
    for student in ("alice", "bob"):
        assert len(judges(student)) == 1 and results[student].score == 1 and not results[student].grader_failures
    # doomed killed two judges: failed, and the record (also on disk) says why in a typed field
    assert len(set(judges("doomed"))) == 2
    for doomed in (results["doomed"], load(result_path(tmp_path / "out", "doomed"))):
        assert doomed.score == 0 and [failure.kind for failure in doomed.grader_failures] == ["judge_stopped"]
        assert doomed.unfinished == doomed.grader_failures[0] and not needs_retry(doomed)
    # a judge that says "done" without a result: the result is lost, not invented
    assert results["unwritten"].grader_failures == (GraderFailure("result_lost", "its result could not be read back"),)
    assert len(judges("unwritten")) == 1 and not needs_retry(results["unwritten"])


def test_every_judge_of_the_pool_takes_a_share(tmp_path):
    students = [f"s{number}" for number in range(6)]
    results, taken = _pool(tmp_path, students, jobs=2)
    assert {judge for judge, _ in taken} == {1, 2}, "both judges started with students of their own"
    assert sorted(student for _, student in taken) == students, "each student taken by one judge, once"
    assert all(results[student].score == 1 and results[student].fingerprint == f"fp-{student}"
               for student in students)


def _real_class(root, count):
    from autograder.lesson.catalogue import copy_package
    from lesson import MODULES, SOLUTIONS

    for index in range(count):
        copy_package(SOLUTIONS, root / "class" / f"s{index}", MODULES)
    return root / "class"


def _recorded(monkeypatch, log, cls, method):
    """Wrap ``cls.method`` to append "pid" to ``log`` at each call, in this process and every judge forked from it."""
    original = getattr(cls, method)

    def wrapped(self, *args, **kwargs):
        with open(log, "a") as handle:
            handle.write(f"{os.getpid()}\n")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(cls, method, wrapped)


@pytest.mark.slow
def test_forked_judges_share_one_warm_zygote_and_a_dead_ones_students_are_graded_again(tmp_path, monkeypatch):
    """Real judges, forked from this process: one zygote for all of them (each spawns its workers from it over a
    socket of its own); a forked judge that dies holding students has them graded by a fresh judge, with full
    marks, and the record counts the extra try."""
    from autograder.commands import judge_loop
    from autograder.sandbox import zygote_client
    from autograder.commands.grading import grade_class

    started, spawned = tmp_path / "zygotes", tmp_path / "spawns"
    _recorded(monkeypatch, started, zygote_client.Zygote, "__init__")
    _recorded(monkeypatch, spawned, zygote_client.SharedZygote, "spawn")
    from autograder.sandbox.isolation import choose_sandbox

    chosen = choose_sandbox("auto", unisolated_ok=True)
    forks = chosen.mode == "bwrap" and chosen.fork
    class_dir = _real_class(tmp_path, 6)
    results = grade_class(class_dir, tmp_path / "out", jobs=2, skip_notebook=True, emit=lambda line: None,
                          unisolated_ok=True)
    assert all(result.score == result.max_score > 0 and result.tries == 1 for result in results) and len(results) == 6
    if forks:  # workers come from a zygote here (bwrap)
        assert len(started.read_text().split()) == 1, "one zygote for the whole run"
        assert len(set(spawned.read_text().split())) == 2, "both judges spawned their workers from it"

    died = tmp_path / "died"
    run_forked = judge_loop.WarmJudge._run_forked

    def dies_once(self, index, tasks_r, done_w):
        if index == 0 and not died.exists():
            died.touch()
            # Holding the two students it was sent: both read first, so a judge that died before the pool's second
            # write (a busy machine runs the child first) cannot leave that student to the other judge.
            received = b""
            while received.count(b"\n") < 2 and (chunk := os.read(tasks_r, 4096)):
                received += chunk
            os._exit(3)
        return run_forked(self, index, tasks_r, done_w)

    monkeypatch.setattr(judge_loop.WarmJudge, "_run_forked", dies_once)
    again = grade_class(class_dir, tmp_path / "again", jobs=2, skip_notebook=True, emit=lambda line: None,
                        unisolated_ok=True)
    assert died.exists() and len(again) == 6
    assert all(result.score == result.max_score for result in again)
    assert sorted(result.tries for result in again) == [1, 1, 1, 1, 2, 2]


PROBE = '''

def shift_matrix(k, d_model, base=10000.0):  # a probe, not an answer: what this worker holds open
    import os, stat
    found = []
    for fd in range(3, 1024):
        try:
            mode = os.fstat(fd).st_mode
        except OSError:
            continue
        found.append("socket" if stat.S_ISSOCK(mode) else "pipe" if stat.S_ISFIFO(mode) else "other")
    return found
'''


def test_a_worker_of_a_shared_zygote_holds_no_judge_s_socket(tmp_path):
    """A worker forked from a zygote that serves several judges holds none of their control sockets (nor anything
    but its own pipes): it cannot ask the zygote for anything, for itself or for another judge's workers."""
    import tempfile

    from autograder.sandbox.launch import WorkerFactory
    from autograder.lesson.catalogue import copy_package
    from autograder.judge.remote import RemoteSubmission
    from autograder.sandbox.isolation import choose_sandbox
    from autograder.intake.submission import read_files
    from lesson import CONTRACT, MODULES, SOLUTIONS

    sandbox = choose_sandbox("auto", unisolated_ok=True)
    if sandbox.mode != "bwrap" or not sandbox.fork:
        pytest.skip("workers are not forked from a zygote here")
    student = copy_package(SOLUTIONS, tmp_path / "probe", MODULES)
    path = student / "positional_encoding.py"
    path.write_text(path.read_text() + PROBE)
    files, _ = read_files(student, CONTRACT)
    with tempfile.TemporaryDirectory() as scratch:
        factory = WorkerFactory(sandbox, scratch, LESSON, lend=2)  # three judges' sockets in the zygote
        try:
            factory.start()
            assert factory.forks
            remote = RemoteSubmission(sandbox, factory.launcher(files, scratch), CONTRACT, files=files)
            try:
                held = remote.call("shift_matrix", 1, 4)
            finally:
                remote.close()
        finally:
            factory.close()
    assert held == ["pipe", "pipe"], held  # its request and reply pipes (its prints go to 1 and 2)
