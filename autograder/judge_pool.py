"""``grade --jobs N``: the work shared by N judge processes, both ends of their pipes.

The main process (:class:`JudgePool`) feeds each judge one student at a time
over its stdin (JSON lines) and reads a line per student done from its stdout,
so a slow submission never holds up the others; the judge (:func:`judge_main`,
``python -m autograder _judge MANIFEST``) grades them with
:func:`~autograder.dispatch.judge_loop` and writes each result itself. What a
judge reports is only that a student is done: the parent reads the result from
the file.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, replace
from pathlib import Path

from . import results as records
from . import assignment as assignments
from .assignment import Assignment
from .dispatch import failed_result, judge_loop, read_tasks, reporter, save_result
from .planning import Task, result_path
from .results import GraderFailure, SubmissionResult
from .sandbox import Limits, Sandbox

# The judge process's argv, before the manifest's path (a test may start a judge of its own instead).
JUDGE_COMMAND = (sys.executable, "-m", "autograder", "_judge")
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


def judge_main(manifest_path: str | Path, siblings: str = "") -> int:
    """Entry of a judge subprocess: read the sandbox from a manifest, tasks from stdin, report on stdout.
    ``siblings``: ``"TASKS,DONE;..."``, the descriptors of the judges to fork from this one (:func:`judge_loop`)."""
    sandbox, out_dir, notebook, descriptor = read_manifest(manifest_path)
    pairs = [tuple(int(fd) for fd in pair.split(",")) for pair in siblings.split(";") if pair]
    streams = [(open(tasks_fd, encoding="utf-8"), open(done_fd, "w", encoding="utf-8")) for tasks_fd, done_fd in pairs]
    judge_loop(read_tasks(sys.stdin), sandbox, out_dir, reporter(sys.stdout), assignments.load(descriptor), notebook,
               siblings=streams)
    return 0


class _Sibling:
    """The pool's end of a judge forked inside another judge (``--siblings``): its task and report streams. It is
    not this process's child: the judge that forked it waits for it."""

    def __init__(self, tasks_fd: int, done_fd: int) -> None:
        self.stdin = open(tasks_fd, "w", encoding="utf-8", buffering=1)
        self.stdout = open(done_fd, encoding="utf-8")

    def wait(self) -> None:
        pass


class JudgePool:
    """Judge processes fed tasks, :data:`OUTSTANDING` at a time each; a judge that dies has the students it held
    graded once more by a fresh judge, and a student held by :data:`ATTEMPTS` judges that died is failed
    (``judge_stopped``).

    ``command`` is the judge's argv; the manifest's path is appended to it.
    """

    def __init__(self, command: Sequence[str], sandbox: Sandbox, out_dir: str | Path,
                 on_done: Callable[[SubmissionResult], None], env: dict[str, str] | None = None,
                 siblings: bool = False) -> None:
        """``siblings``: the judge command takes ``--siblings`` (the kit's own judge does), so the first judge
        forks the others warm rather than each starting from nothing."""
        self.command, self.env, self.siblings = list(command), env, siblings
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
        judges = min(jobs, len(self.pending))
        if self.siblings and judges > 1:
            self._start(judges - 1)
        else:
            for _ in range(judges):
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

    def _start(self, siblings: int = 0) -> None:
        """Start a judge (and, with ``siblings``, have it fork that many more, each fed over pipes of its own)."""
        pipes = [(os.pipe(), os.pipe()) for _ in range(siblings)]  # (tasks r, w), (done r, w) per sibling
        theirs = [fd for (tasks_r, _), (_, done_w) in pipes for fd in (tasks_r, done_w)]
        extra = ["--siblings", ";".join(f"{tr},{dw}" for (tr, _), (_, dw) in pipes)] if siblings else []
        try:
            child = subprocess.Popen(self.command + extra, env=self.env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, bufsize=1, pass_fds=theirs)
        finally:
            for fd in theirs:
                os.close(fd)
        judges = [child] + [_Sibling(tasks_w, done_r) for (_, tasks_w), (done_r, _) in pipes]
        for judge in judges:
            self.children.append(judge)
            self.held[judge] = []
            self.selector.register(judge.stdout, selectors.EVENT_READ, judge)
        for judge in judges:
            for _ in range(OUTSTANDING):
                self._feed(judge)

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
        message = json.loads(line)
        finished = [task for task in self.held[child] if task.student == message.get("done")]
        for task in finished:
            self.held[child].remove(task)
            try:
                result = records.load(result_path(self.out_dir, task.student))
            except (OSError, ValueError, KeyError):
                result = failed_result(task, self.sandbox,
                                       GraderFailure("result_lost", "its result could not be read back"))
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
                      judge_command: Sequence[str] = JUDGE_COMMAND, meanwhile: Callable[[], None] | None = None
                      ) -> None:
    """Grade ``tasks`` of ``assignment`` on ``jobs`` judge processes started with ``judge_command`` (plus a
    manifest's path); ``meanwhile()`` once they are started."""
    with tempfile.TemporaryDirectory(prefix="grade-") as tmp:
        manifest = Path(tmp) / "manifest.json"
        write_manifest(manifest, sandbox, out_dir, notebook, assignment.descriptor)
        env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
        JudgePool([*judge_command, str(manifest)], sandbox, out_dir, on_done, env,
                  siblings=tuple(judge_command) == JUDGE_COMMAND).run(tasks, jobs, meanwhile)
