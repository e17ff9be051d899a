"""``grade --jobs N``: the work shared by N judges, both ends of their pipes.

The main process (:class:`JudgePool`) feeds each judge one student at a time
over a pipe (JSON lines) and reads a line per student done from another, so a
slow submission never holds up the others. The judges are forked from the
main process once it is a warm judge itself (:class:`~autograder.commands.judge_loop.WarmJudge`:
torch imported, hidden tests collected, a zygote warm, which they share); with
a judge command, each judge is a process of its own instead (:func:`judge_main`,
``python -m autograder _judge MANIFEST``; the tests' fake judges). Either way
a judge grades with the same loop and writes each result itself; what it
reports is only that a student is done: the parent reads the result from the
file.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from ..records import results as records
from ..lesson import assignment as assignments
from ..lesson.assignment import Assignment
from .judge_loop import WarmJudge, failed_result, judge_loop, read_tasks, reporter, save_result
from .planning import Task
from ..intake.naming import result_path
from ..records.results import GraderFailure, SubmissionResult
from ..sandbox.head_start import HeadStart
from ..sandbox.isolation import Limits, Sandbox

OUTSTANDING = 2  # per judge: the student being graded and the one whose worker warms up
ATTEMPTS = 2  # judges that may die holding a student before the student is failed


def write_manifest(path: Path, sandbox: Sandbox, out_dir: str | Path, notebook: bool, descriptor: Path) -> None:
    """What every judge of the pool needs: the sandbox, the output folder, whether notebooks are graded, and
    the assignment's descriptor."""
    path.write_text(json.dumps({"mode": sandbox.mode, "note": sandbox.note, "out_dir": str(out_dir),
                                "threads": sandbox.threads, "limits": asdict(sandbox.limits), "fork": sandbox.fork,
                                "landlock": sandbox.landlock, "notebook": notebook, "assignment": str(descriptor)}))


def read_manifest(path: str | Path) -> tuple[Sandbox, str, bool, str]:
    """``(sandbox, out_dir, notebook, descriptor)`` of :func:`write_manifest`."""
    manifest = json.loads(Path(path).read_text())
    sandbox = Sandbox(manifest["mode"], manifest["note"], Limits(**manifest["limits"]), int(manifest["threads"]),
                      bool(manifest["fork"]), int(manifest["landlock"]))
    return sandbox, str(manifest["out_dir"]), bool(manifest.get("notebook")), str(manifest["assignment"])


def judge_main(manifest_path: str | Path) -> int:
    """Entry of a judge subprocess: read the sandbox from a manifest, tasks from stdin, report on stdout."""
    sandbox, out_dir, notebook, descriptor = read_manifest(manifest_path)
    judge_loop(read_tasks(sys.stdin), sandbox, out_dir, reporter(sys.stdout), assignments.load(descriptor), notebook)
    return 0


class _Forked:
    """The pool's end of a judge forked from this process (:meth:`~autograder.commands.judge_loop.WarmJudge.fork`): its task
    and report streams, and its pid."""

    def __init__(self, pid: int, tasks_fd: int, done_fd: int) -> None:
        self.pid = pid
        self.stdin = open(tasks_fd, "w", encoding="utf-8", buffering=1)
        self.stdout = open(done_fd, encoding="utf-8")

    def wait(self) -> None:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


class JudgePool:
    """Judge processes fed tasks, :data:`OUTSTANDING` at a time each; a judge that dies has the students it held
    graded once more by a fresh judge, and a student held by :data:`ATTEMPTS` judges that died is failed
    (``judge_stopped``).

    ``command`` is the judge's argv; the manifest's path is appended to it.
    """

    def __init__(self, command: Sequence[str] | None, sandbox: Sandbox, out_dir: str | Path,
                 on_done: Callable[[SubmissionResult], None], env: dict[str, str] | None = None,
                 fork: Callable[[], Any] | None = None) -> None:
        """``fork()``: start a judge by forking a warm one (an object with ``stdin``, ``stdout`` and ``wait()``),
        instead of running ``command``."""
        self.command, self.env, self.fork = list(command or ()), env, fork
        self.sandbox, self.out_dir, self.on_done = sandbox, out_dir, on_done
        self.pending: list[Task] = []  # not sent to any judge yet, in order
        self.children: list[subprocess.Popen] = []  # every judge started, to be waited for
        self.held: dict[subprocess.Popen, list[Task]] = {}  # each judge's students sent and not reported done
        self.deaths: dict[str, int] = {}  # per student: judges that died holding them
        self.selector = selectors.DefaultSelector()

    def run(self, tasks: Iterable[Task], jobs: int, meanwhile: Callable[[], None] | None = None) -> None:
        """Grade ``tasks`` on up to ``jobs`` judges; ``on_done`` once per task, as each result is known;
        ``meanwhile()`` once the judges are started (this process would only wait for them)."""
        self.pending = list(tasks)
        for _ in range(min(jobs, len(self.pending))):
            self._start()
        if meanwhile is not None:
            meanwhile()
        while self.selector.get_map():
            for key, _ in self.selector.select():
                child = key.data
                line = child.stdout.readline()
                if line:
                    self._reported(child, line)
                else:
                    self._ended(child)
        for child in self.children:
            child.wait()

    def _start(self) -> None:
        if self.fork is not None:
            child = self.fork()
        else:
            child = subprocess.Popen(self.command, env=self.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, bufsize=1)
        self.children.append(child)
        self.held[child] = []
        self.selector.register(child.stdout, selectors.EVENT_READ, child)
        for _ in range(OUTSTANDING):
            self._feed(child)

    def _feed(self, child: subprocess.Popen) -> None:
        """Send ``child`` the next pending task, or, with none left, close its stdin (it ends when done)."""
        if child.stdin.closed:
            return
        if not self.pending:
            self._close_stdin(child)
            return
        task = self.pending.pop(0)
        self.held[child].append(task)  # held from now: if the judge is dead already, its end requeues the task
        try:
            child.stdin.write(json.dumps(task.to_json()) + "\n")
            child.stdin.flush()
        except BrokenPipeError:
            self._close_stdin(child)

    @staticmethod
    def _close_stdin(child: subprocess.Popen) -> None:
        try:
            child.stdin.close()
        except BrokenPipeError:  # a line still buffered for a judge that is gone: closed all the same
            pass

    def _reported(self, child: subprocess.Popen, line: str) -> None:
        """A judge's line ``{"done": student}``: that student's result, read back from its file."""
        try:
            message = json.loads(line)
        except ValueError:  # not a report (a judge's stray print): nothing is done, the judge's next line counts
            return
        done = message.get("done") if isinstance(message, dict) else None
        finished = [task for task in self.held[child] if task.student == done]
        for task in finished:
            self.held[child].remove(task)
            try:
                result = records.load(result_path(self.out_dir, task.student))
            except Exception:  # noqa: BLE001 - whatever is there, it is not this student's record: said in theirs
                result = save_result(failed_result(task, self.sandbox, GraderFailure(
                    "result_lost", "its result could not be read back")), self.out_dir)
            if self.deaths.get(task.student):  # a judge died holding it first: the record says it was graded again
                result = save_result(replace(result, tries=result.tries + self.deaths[task.student]), self.out_dir)
            self.on_done(result)
        self._feed(child)

    def _ended(self, child: subprocess.Popen) -> None:
        """A judge's output ended: whatever it still held goes back to the front of the queue, for a fresh judge,
        unless that student's judge died before. Requeued in reverse, so the one it was grading (the oldest)
        comes after the ones only waiting behind it."""
        self.selector.unregister(child.stdout)
        held, self.held[child] = self.held[child], []
        for task in held:
            self.deaths[task.student] = self.deaths.get(task.student, 0) + 1
            if self.deaths[task.student] < ATTEMPTS:
                self.pending.insert(0, task)
            else:
                failure = GraderFailure("judge_stopped", "the judge process stopped unexpectedly, twice")
                self.on_done(save_result(failed_result(task, self.sandbox, failure), self.out_dir))
        if self.pending:
            self._start()


def grade_in_parallel(tasks: Iterable[Task], sandbox: Sandbox, out_dir: str | Path, jobs: int,
                      on_done: Callable[[SubmissionResult], None], assignment: Assignment, notebook: bool = False,
                      judge_command: Sequence[str] | None = None, meanwhile: Callable[[], None] | None = None,
                      head_start: HeadStart | None = None) -> None:
    """Grade ``tasks`` of ``assignment`` on ``jobs`` judges; ``meanwhile()`` once they are started; ``head_start``:
    a zygote started before the sandbox was chosen, shared by the judges if it fits.

    The judges are forked from this process once it has imported torch, collected the hidden tests and warmed a
    zygote, which they share (each over a socket of its own): every core grades from about the moment one judge
    would. With ``judge_command`` (plus a manifest's path) each judge is a process of that command instead.
    """
    if judge_command is not None:
        with tempfile.TemporaryDirectory(prefix="grade-") as tmp:
            manifest = Path(tmp) / "manifest.json"
            write_manifest(manifest, sandbox, out_dir, notebook, assignment.descriptor)
            env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
            JudgePool([*judge_command, str(manifest)], sandbox, out_dir, on_done, env).run(tasks, jobs, meanwhile)
        return
    # meanwhile() runs before the forks: what it imports, the judges share.
    with WarmJudge(sandbox, out_dir, assignment, notebook, lend=jobs, meanwhile=meanwhile,
                   head_start=head_start) as warm:
        JudgePool(None, sandbox, out_dir, on_done, fork=lambda: _Forked(*warm.fork())).run(tasks, jobs)
