"""Grading tasks in this process: one judge, one student after another, each result written as it is known.

A student whose grading fails for any reason on the grader's side gets a
result that says so (a typed :class:`~autograder.records.results.GraderFailure` and a
note in words), and the loop moves on. The failures retried are a worker that
could not be started and a machine too busy to run one (``machine_busy``):
nothing a submission does can lead there. Each student is behind a fault barrier
(:func:`grade_one`, :func:`save_result`, :func:`record_failure`): whatever goes wrong
while grading or recording one student becomes that student's record, never the
end of the class.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import json
import os
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..sandbox import allocator, core_pairing
from ..notebook import stage
from ..lesson.assignment import Assignment
from ..records import results as records
from ..intake import submission as submissions
from .planning import Task
from ..intake.naming import folder_note, result_path
from ..records.handin import Handin
from ..records.results import GraderFailure, SubmissionResult
from ..sandbox.head_start import HeadStart
from ..sandbox.isolation import Sandbox
from ..sandbox.launch import WorkerFactory
from ..worker import linux, stand_ins
from ..worker.tree import remove_tree

NO_WORKER = "no worker could be started"
RETRIES = 2  # more tries for a student the machine could not grade; then the record says they still need grading
RETRIED = ("no_worker", "machine_busy")


def failed_result(task: Task, sandbox: Sandbox, failure: GraderFailure) -> SubmissionResult:
    """A zero result that records why grading this student did not finish (``failure``, one of the kinds in
    :data:`~autograder.records.results.UNFINISHED`)."""
    note = f"grading failed: {failure.reason}"
    return SubmissionResult(student=task.student, sandbox=sandbox.mode, fingerprint=task.fingerprint, output=note,
                            notes=(note,), grader_failures=(failure,))


def needs_retry(result: SubmissionResult) -> bool:
    """Whether no worker could be started for this student, or the machine was too busy to run it: the grading
    machine's trouble, which another try may not meet. Nothing a submission does leads here (its crashes, hangs,
    sleeps and malformed replies fail its own tests; a worker that lowers its own priority is not "busy"), so a
    retry can never be a second chance bought by the submission. Read from the typed failures only: a note's
    text may carry words the submission chose."""
    return any(failure.kind in RETRIED for failure in result.grader_failures)


@dataclass
class _Prepared:
    """A task whose files are read, with the means to start its worker and one started."""

    task: Task
    files: dict = field(default_factory=dict)
    problems: dict = field(default_factory=dict)
    scratch: Path = Path()
    launch: Any = None
    worker: Any = None
    failure: GraderFailure | None = None  # no worker could be started
    intake: Any = None  # with the notebook, when it is graded
    notebook_launch: Any = None
    notebook_worker: Any = None  # the notebook's worker, started with the code's (until the notebook stage takes it)
    seconds: float = 0.0  # wall time spent preparing it (its worker then starts while another student is graded)


def grader_error(error: BaseException) -> str:
    """The grader's own exception in one bounded line: its type and where in the kit it was raised (its message
    may quote the submission, so it stays out)."""
    frames = [frame for frame in traceback.extract_tb(error.__traceback__) if "/autograder/" in frame.filename]
    place = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    return f"{type(error).__name__}{place}"


_SCRATCH_NAMES = itertools.count()  # a judge's students' scratch folders, each in that judge's own scratch root


def prepare(task: Task, factory: WorkerFactory, scratch_root: str | Path, notebook: str | None = None) -> _Prepared:
    """Read ``task``'s files and start its worker now, so it gets ready while the previous student is graded.

    The worker runs no student code before its first request, and no request before the previous worker is
    confirmed gone (a forked worker's kill runs while the result is written and the next student prepared).
    """
    started = time.monotonic()
    # Named now, made only by a launch that needs the files on disk (a forked worker gets them over its pipe): a
    # folder made and removed where the zygote's sandbox sees it costs milliseconds a student.
    prepared = _Prepared(task, scratch=Path(scratch_root) / f"student-{next(_SCRATCH_NAMES)}")
    try:
        intake = submissions.read_submission(task.folder, factory.contract, notebook, factory.stubs)
        prepared.files = intake.files
        prepared.problems = {what: why for what, why in intake.problems.items() if what != "notebook"}
        if notebook:
            prepared.intake = intake
            prepared.notebook_launch = factory.notebook_launcher(prepared.files, prepared.scratch)
        prepared.launch = factory.launcher(prepared.files, prepared.scratch)
        prepared.worker = prepared.launch()
        if notebook and intake.notebook is not None:
            try:
                prepared.notebook_worker = prepared.notebook_launch()
            except Exception:  # noqa: BLE001 - the notebook stage starts one itself, and says why it could not
                prepared.notebook_worker = None
    except Exception as error:  # noqa: BLE001 - recorded in this student's result, never raised
        prepared.failure = GraderFailure("no_worker", f"{NO_WORKER}: {grader_error(error)}")
    prepared.seconds = time.monotonic() - started
    return prepared


def grade_prepared(prepared: _Prepared, sandbox: Sandbox, judge: Any, out_dir: str | Path | None = None
                   ) -> SubmissionResult:
    """Grade a prepared task with ``judge`` (its notebook too, when it was read); any grader-side exception
    becomes a failed result (never raised). Its ``execution_time`` is the wall time of the whole student: the
    preparation, the code and the notebook (the judge alone times only the code)."""
    started = time.monotonic()
    result = _grade_prepared(prepared, sandbox, judge, out_dir)
    # The hand-in (folder, commit, lateness) as the grading process found it: the worker never sees it.
    return replace(result, execution_time=prepared.seconds + time.monotonic() - started,
                   handin=Handin.from_json(prepared.task.handin))


def _grade_prepared(prepared: _Prepared, sandbox: Sandbox, judge: Any, out_dir: str | Path | None
                    ) -> SubmissionResult:
    task = prepared.task
    try:
        if prepared.failure is not None:
            return failed_result(task, sandbox, prepared.failure)
        result = judge.grade(task.student, prepared.files, prepared.problems, sandbox, prepared.launch,
                             task.fingerprint, worker=prepared.worker)
        if prepared.intake is not None and not needs_retry(result):
            worker, prepared.notebook_worker = prepared.notebook_worker, None  # the notebook stage closes it
            result = stage.grade_into(result, prepared.intake, sandbox, prepared.notebook_launch, out_dir,
                                               judge.assignment, worker=worker)
        return result
    except Exception as error:  # noqa: BLE001 - one student's failure must not stop the class
        return failed_result(task, sandbox, GraderFailure("grader_error", grader_error(error)))
    finally:
        if prepared.notebook_worker is not None:  # started ahead, never used (the code is graded again)
            prepared.notebook_worker.close()
        remove_tree(prepared.scratch)  # a student's nest of any depth: never raises


@contextlib.contextmanager
def _scratch_folder() -> Iterator[str]:
    """A judge's scratch folder, where its workers' folders lie: removed by :func:`remove_tree` however deep a
    student nested folders there (``TemporaryDirectory``'s cleanup raised RecursionError and stopped the class)."""
    folder = tempfile.mkdtemp(prefix="judge-")
    try:
        yield folder
    finally:
        remove_tree(folder)


def save_result(result: SubmissionResult, out_dir: str | Path) -> SubmissionResult:
    """Write ``result`` (atomically, its text made valid first: :func:`~autograder.records.results.valid_result`)
    and return it as written; a file-system error costs this student only: their result says so, and is still
    returned. Any other exception leaves a failure record in its place (:func:`record_failure`)."""
    try:
        result = records.valid_result(result)
        records.save(result, result_path(out_dir, result.student))
    except OSError as error:
        note = f"the result could not be written ({os.strerror(error.errno or 0)})"
        result = replace(result, notes=result.notes + (note,))
    except Exception as error:  # noqa: BLE001 - this student's record, never the class's end
        result = record_failure(result, out_dir, f"its record could not be written: {grader_error(error)}")
    return result


def record_failure(result: SubmissionResult, out_dir: str | Path, reason: str) -> SubmissionResult:
    """The minimal record of a student whose record or reports could not be written (``record_failed``, which
    ``--resume`` regrades), written in place of theirs if it can be, and returned either way; never raises."""
    failure = GraderFailure("record_failed", reason)
    note = f"grading failed: {reason}"
    minimal = SubmissionResult(student=result.student, sandbox=result.sandbox, fingerprint=result.fingerprint,
                               output=note, notes=(note,), grader_failures=(failure,), tries=result.tries)
    try:
        records.save(minimal, result_path(out_dir, result.student))
    except Exception as error:  # noqa: BLE001 - nothing more can be written for them: the run's summary says it
        minimal = replace(minimal, notes=minimal.notes + (f"not even this could be written ({grader_error(error)})",))
    return minimal


def read_tasks(stream) -> Iterator[Task]:
    """The tasks a judge is sent, one JSON line each (``grade --jobs N``), until ``stream`` closes."""
    for line in stream:
        if line.strip():
            yield Task.from_json(json.loads(line))


def reporter(stream) -> Callable[[SubmissionResult], None]:
    """``done(result)`` for a judge of the pool: one JSON line per student done (the pool reads the result from its
    file; the line only says it is there)."""

    def done(result: SubmissionResult) -> None:
        stream.write(json.dumps({"done": result.student, "score": result.score, "max": result.max_score}) + "\n")
        stream.flush()

    return done


def judge_loop(tasks: Iterable[Task], sandbox: Sandbox, out_dir: str | Path,
               done: Callable[[SubmissionResult], None], assignment: Assignment, notebook: bool = False,
               meanwhile: Callable[[], None] | None = None, core: int | None = None,
               head_start: HeadStart | None = None) -> None:
    """Grade ``tasks`` (an iterator) of ``assignment`` in this process, writing each result; call ``done(result)``
    after each; ``notebook``: grade its notebook too (when it has one); ``meanwhile()``: work of the caller's
    done while the zygote starts (this process would only wait for it); ``core``: the core this judge and its
    workers grade on (:mod:`.core_pairing`; None: wherever the scheduler puts them); ``head_start``: a zygote
    started before the sandbox was chosen, used if it fits.

    The next student is prepared before the current one is graded, so a slow worker start-up overlaps the
    current tests.
    """
    with WarmJudge(sandbox, out_dir, assignment, notebook, meanwhile=meanwhile, head_start=head_start) as warm:
        spare = core_pairing.spare_cores(1)  # read before this thread is placed
        with core_pairing.judge_on(core) as placed:
            warm.factory.core, warm.factory.spare = placed, spare
            _grade_each(iter(tasks), warm.factory, warm.judge, sandbox, warm.scratch_root, out_dir, done,
                        warm.notebook)


class WarmJudge:
    """This process made a judge: a zygote started, then torch imported and the hidden tests collected while the
    zygote imports torch too. ``lend``: control sockets of that zygote for judges forked from this process
    (:meth:`fork`, ``grade --jobs N``), which then start in milliseconds rather than with a torch import, a
    collection and a zygote of their own. ``meanwhile()``: the caller's own start-up work, done while the zygote
    imports torch (before this process's torch import: the zygote takes longer to start than it does).
    ``head_start``: a zygote started before the sandbox was chosen (:mod:`~autograder.sandbox.head_start`), taken
    as this judge's own if it fits."""

    def __init__(self, sandbox: Sandbox, out_dir: str | Path, assignment: Assignment, notebook: bool = False,
                 lend: int = 0, meanwhile: Callable[[], None] | None = None,
                 head_start: HeadStart | None = None) -> None:
        self.sandbox, self.out_dir, self.assignment, self.lend = sandbox, out_dir, assignment, lend
        self.meanwhile, self.head_start = meanwhile, head_start
        self.notebook = assignment.notebook if notebook else None  # the file to read, when the notebook is graded
        self.forked = 0

    def __enter__(self) -> "WarmJudge":
        allocator.keep_big_buffers()
        self.scratch_root = tempfile.mkdtemp(prefix="judge-")  # removed by remove_tree: students write below it
        ahead = self.head_start.take(self.sandbox, self.lend) if self.head_start is not None else None
        self.factory = WorkerFactory(self.sandbox, self.scratch_root, self.assignment, lend=self.lend, zygote=ahead,
                                     notebook=self.notebook is not None)
        collecting = gc.isenabled()
        gc.disable()  # start-up allocates for good: collections then would only walk it all, at length
        try:
            # The zygote first: its torch import then runs beside this process's own, not after it.
            self.factory.start()
            if self.meanwhile is not None:
                self.meanwhile()
            deferred = stand_ins.defer()  # as in the zygote: the packages of torch no judge uses at once
            with stand_ins.inspect_shortcuts():  # as in the zygote: a share of the import
                import torch
            stand_ins.bind(deferred)

            from ..judge.grade import Judge  # imports pytest and the hidden tests; only judges need them

            # The judge's tensors are small; more threads only spin and steal cores from other judges and workers.
            torch.set_num_threads(1)
            self.judge = Judge(self.assignment)
            # What start-up built (torch, pytest, the hidden tests, the reference) lives as long as the judge: kept
            # out of later collections, which would walk all of it (and in a forked judge write to each object's
            # header, copying its page).
            gc.freeze()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        finally:
            if collecting:
                gc.enable()
        return self

    def __exit__(self, *exc_info) -> None:
        gc.unfreeze()  # what this judge froze can be collected again once it is done (a process may start another)
        self.factory.close()
        remove_tree(self.scratch_root)

    def fork(self) -> tuple[int, int, int]:
        """Fork a judge that grades the tasks it reads (one JSON line each) and reports each student done; return
        ``(pid, the descriptor its tasks are written to, the one its reports are read from)``. It uses one of the
        lent control sockets of this process's zygote while some are left (the zygote's hello read first), else
        a zygote of its own, and it dies with this process."""
        if self.forked == 0:
            self.factory.forks  # noqa: B018 - the zygote warm (or known to be absent) before it is shared
        index, self.forked = self.forked, self.forked + 1
        tasks_r, tasks_w = os.pipe()
        done_r, done_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                code = self._run_forked(index, tasks_r, done_w)
            finally:
                os._exit(code)
        os.close(tasks_r)
        os.close(done_w)
        zygote = self.factory.zygote
        if zygote is not None and index < len(zygote.lent):  # so the zygote sees that judge's socket close with it
            zygote.lent[index].close()
        return pid, tasks_w, done_r

    def _run_forked(self, index: int, tasks_r: int, done_w: int) -> int:
        """In a forked judge: keep only what it needs, then grade."""
        parent = os.getppid()
        linux.prctl(linux.PR_SET_PDEATHSIG, signal.SIGKILL)  # with the pool gone, nobody would read its reports
        if os.getppid() != parent:
            return 1
        shared = self.factory.share(index)
        keep = {2, tasks_r, done_w}
        if shared is not None:
            keep |= {shared.control.fileno(), shared.process.pidfd}
        null = os.open(os.devnull, os.O_RDWR)  # the pool's own stdin and stdout are not this judge's
        os.dup2(null, 0)
        os.dup2(null, 1)
        keep |= {0, 1}
        # Nothing else of the pool's: other judges' pipes (a copy held here would keep their ends open), the zygote's
        # other sockets, its log.
        for fd in map(int, os.listdir("/proc/self/fd")):
            if fd not in keep:
                with contextlib.suppress(OSError):
                    os.close(fd)
        tasks = read_tasks(open(tasks_r, encoding="utf-8"))
        done = reporter(open(done_w, "w", encoding="utf-8"))
        with _scratch_folder() as scratch_root:
            own = WorkerFactory(self.sandbox, scratch_root, self.assignment, zygote=shared,
                                notebook=self.notebook is not None)
            try:
                spare = core_pairing.spare_cores(self.lend)  # read before this thread is placed
                with core_pairing.judge_on(core_pairing.core_for(index, self.lend, self.sandbox.threads)) as core:
                    own.core, own.spare = core, spare
                    _grade_each(tasks, own, self.judge, self.sandbox, scratch_root, self.out_dir, done,
                                self.notebook)
            finally:
                own.close()
        return 0


def _grade_each(tasks, factory, judge, sandbox, scratch_root, out_dir, done, notebook) -> None:
    """Grade ``tasks`` one after another with ``judge``, the next prepared while the current one is graded."""
    task = next(tasks, None)
    current = prepare(task, factory, scratch_root, notebook) if task else None
    while current is not None:
        task = next(tasks, None)
        following = prepare(task, factory, scratch_root, notebook) if task else None
        done(grade_one(current, factory, judge, sandbox, scratch_root, out_dir, notebook))
        current = following


def grade_one(current: _Prepared, factory: WorkerFactory, judge: Any, sandbox: Sandbox, scratch_root: str | Path,
              out_dir: str | Path, notebook: str | None) -> SubmissionResult:
    """Grade one prepared student (again, a few times, where the machine failed them) and write their record;
    the fault barrier: any exception becomes this student's record (``grader_error``), never raised."""
    try:
        return _grade_one(current, factory, judge, sandbox, scratch_root, out_dir, notebook)
    except Exception as error:  # noqa: BLE001 - one student's failure must not stop the class
        failed = failed_result(current.task, sandbox, GraderFailure("grader_error", grader_error(error)))
        return save_result(failed, out_dir)


def _grade_one(current, factory, judge, sandbox, scratch_root, out_dir, notebook) -> SubmissionResult:
    result = grade_prepared(current, sandbox, judge, out_dir)
    for attempt in range(RETRIES):  # the grader's side broke, not the student's code: again, a few times
        if not needs_retry(result):
            break
        retried = grade_prepared(prepare(current.task, factory, scratch_root, notebook), sandbox, judge, out_dir)
        result = replace(retried, notes=retried.notes + (
            f"graded again (try {attempt + 2}) after a grader failure",), tries=attempt + 2,
            execution_time=result.execution_time + retried.execution_time)
    if needs_retry(result):
        result = replace(result, notes=result.notes + (
            "still needs grading: the machine could not grade this student; no test was charged",))
    if factory.note and factory.note not in result.notes:
        result = replace(result, notes=result.notes + (factory.note,))
    renamed = folder_note(Path(current.task.folder).name)
    if renamed:
        result = replace(result, notes=result.notes + (renamed,))
    return save_result(result, out_dir)
