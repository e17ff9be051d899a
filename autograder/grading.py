"""``python -m autograder grade``: grade every student folder of a class and write the reports.

Data flows one way: student folder -> staged files -> worker (sandbox) ->
judge -> ``results/<student>.json`` -> reports. Each student's result is
written atomically as soon as it is known; a student whose grading fails for
any reason gets a result that says so, and the batch moves on.

With ``--jobs N`` the work is shared by N judge processes (``python -m
autograder _judge``) fed one student at a time over a pipe (JSON lines), so
a slow submission never holds up the others.
"""

import hashlib
import json
import os
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from . import nbgrader_record, notebook_stage, paths
from . import results as records
from . import submission as submissions
from .errors import KitError
from .progress import Progress
from .reports import write_reports
from .sandbox import Limits, Sandbox, choose_sandbox, lock_instructor_folders
from .launch import WorkerFactory

RESULTS = "results"
SHARD_FILE = "shard.json"
# Folders a class directory may hold that are not students (version control, editors, caches).
NOT_STUDENTS = {".git", ".github", ".ipynb_checkpoints", "__pycache__", ".hypothesis", ".pytest_cache", ".venv"}


@dataclass(frozen=True)
class Task:
    """One student to grade: id, folder, and the fingerprint of (submission, grader)."""

    student: str
    folder: str
    fingerprint: str

    def to_json(self):
        return {"student": self.student, "folder": self.folder, "fingerprint": self.fingerprint}

    @classmethod
    def from_json(cls, data):
        return cls(str(data["student"]), str(data["folder"]), str(data["fingerprint"]))


def _has_submission(folder):
    """Whether a folder holds any of the student files (how a hidden folder still counts as a student)."""
    files, _ = submissions.read_files(folder)
    return bool(files)


def _is_student(entry, skip):
    """Whether a class folder entry is a student: a folder, or a link (graded as refused, so it is seen), not the
    output folder, not a tool's folder; a hidden one only when it holds a submission."""
    try:
        if entry.name in NOT_STUDENTS or not (entry.is_symlink() or entry.is_dir()):
            return False
        if entry.is_symlink():
            return not entry.name.startswith(".")
        return entry.resolve() != skip and (not entry.name.startswith(".") or _has_submission(entry))
    except OSError:  # unreadable: still a student, whose intake will say why
        return True


def discover(class_dir, out_dir=None):
    """``[(student id, folder)]`` sorted by id; KitError for a missing or empty class folder.

    An output folder placed inside the class folder is not a student, nor is a hidden folder (a name starting
    with a dot, such as a tool's cache) unless it holds a submission. A student folder that is a symbolic link is
    listed: intake refuses it with a note, so it is graded 0 rather than silently skipped or followed.
    """
    class_dir = Path(class_dir)
    skip = Path(out_dir).resolve() if out_dir else None
    if not class_dir.exists():
        raise KitError(f"class folder not found: {class_dir}")
    if not class_dir.is_dir():
        raise KitError(f"not a folder: {class_dir}")
    students = sorted((entry.name, entry) for entry in class_dir.iterdir() if _is_student(entry, skip))
    if not students:
        raise KitError(f"no student folders in {class_dir} (expected one folder per student)")
    return students


def result_path(out_dir, student):
    return Path(out_dir) / RESULTS / f"{submissions.safe_name(student)}.json"


def failed_result(task, sandbox, reason):
    """A zero result that records why grading this student did not finish."""
    return records.SubmissionResult(student=task.student, sandbox=sandbox.mode, fingerprint=task.fingerprint,
                                    output=f"grading failed: {reason}", notes=(f"grading failed: {reason}",))


@dataclass
class _Prepared:
    """A task whose files are read, with the means to start its worker and one started."""

    task: Task
    files: dict
    problems: dict
    scratch: Path
    launch: object = None
    worker: object = None
    error: str = ""
    intake: object = None  # with the notebook, when it is graded
    notebook_launch: object = None


def prepare(task, factory, scratch_root, notebook=False):
    """Read ``task``'s files and start its worker now, so it gets ready while the previous student is graded.

    The worker runs no student code before its first request, which comes after the previous worker is gone.
    """
    prepared = _Prepared(task, {}, {}, Path(tempfile.mkdtemp(prefix="student-", dir=scratch_root)))
    try:
        intake = submissions.read_submission(task.folder, notebook=notebook)
        prepared.files = intake.files
        prepared.problems = {what: why for what, why in intake.problems.items() if what != "notebook"}
        if notebook:
            prepared.intake = intake
            prepared.notebook_launch = factory.notebook_launcher(prepared.files, prepared.scratch)
        prepared.launch = factory.launcher(prepared.files, prepared.scratch)
        prepared.worker = prepared.launch()
    except Exception as error:  # noqa: BLE001 - recorded in this student's result, never raised
        prepared.error = f"{NO_WORKER}: {_grader_error(error)}"
    return prepared


NO_WORKER = "no worker could be started"


def _grader_error(error):
    """The grader's own exception in one bounded line: its type and where in the kit it was raised (its message
    may quote the submission, so it stays out)."""
    frames = [frame for frame in traceback.extract_tb(error.__traceback__) if "/autograder/" in frame.filename]
    place = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    return f"{type(error).__name__}{place}"


def grade_prepared(prepared, sandbox, judge, out_dir=None):
    """Grade a prepared task with ``judge`` (its notebook too, when it was read); any grader-side exception
    becomes a failed result (never raised)."""
    task = prepared.task
    try:
        if prepared.error:
            return failed_result(task, sandbox, prepared.error)
        result = judge.grade(task.student, prepared.files, prepared.problems, sandbox, prepared.launch,
                             task.fingerprint, worker=prepared.worker)
        if prepared.intake is not None and not needs_retry(result):
            result = notebook_stage.grade_into(result, prepared.intake, sandbox, prepared.notebook_launch, out_dir)
        return result
    except Exception as error:  # noqa: BLE001 - one student's failure must not stop the class
        return failed_result(task, sandbox, _grader_error(error))
    finally:
        shutil.rmtree(prepared.scratch, ignore_errors=True)


def needs_retry(result):
    """Whether no worker could be started for this student: the grading machine's trouble, which a second try
    may not meet. Nothing a submission does leads here (its crashes, hangs and malformed replies fail its own
    tests), so a retry can never be a second chance bought by the submission."""
    return any(note.startswith(f"grading failed: {NO_WORKER}") or note.startswith(NO_WORKER)
               for note in result.notes)


def save_result(result, out_dir):
    """Write ``result`` (atomically); a file-system error costs this student only: their result says so, and
    is still returned."""
    try:
        records.save(result, result_path(out_dir, result.student))
    except OSError as error:
        note = f"the result could not be written ({os.strerror(error.errno or 0)})"
        result = replace(result, notes=result.notes + (note,))
    return result


def judge_loop(tasks, sandbox, out_dir, done, notebook=False):
    """Grade ``tasks`` (an iterator) in this process, writing each result; call ``done(result)`` after each.

    The next student is prepared before the current one is graded, so a slow worker start-up overlaps the
    current tests.
    """
    import torch

    from .judge import Judge  # imports pytest and the hidden tests; only judges need them

    # The judge's own tensors are small; more threads only spin and steal cores from other judges and workers.
    torch.set_num_threads(1)
    tasks = iter(tasks)
    with tempfile.TemporaryDirectory(prefix="mha-pe-judge-") as scratch_root:
        factory = WorkerFactory(sandbox, scratch_root)
        try:
            factory.start()  # its torch import runs while the hidden tests are collected
            judge = Judge()
            task = next(tasks, None)
            current = prepare(task, factory, scratch_root, notebook) if task else None
            while current is not None:
                task = next(tasks, None)
                following = prepare(task, factory, scratch_root, notebook) if task else None
                result = grade_prepared(current, sandbox, judge, out_dir)
                if needs_retry(result):  # the grader's side broke, not the student's code: once more
                    retried = grade_prepared(prepare(current.task, factory, scratch_root, notebook), sandbox, judge,
                                             out_dir)
                    result = replace(retried, notes=retried.notes + ("graded a second time after a grader failure",))
                if factory.note and factory.note not in result.notes:
                    result = replace(result, notes=result.notes + (factory.note,))
                done(save_result(result, out_dir))
                current = following
        finally:
            factory.close()


def judge_main(manifest_path):
    """Entry of a judge subprocess: read the sandbox from a manifest, tasks from stdin, report on stdout."""
    manifest = json.loads(Path(manifest_path).read_text())
    sandbox = Sandbox(manifest["mode"], manifest["note"], Limits(**manifest["limits"]), int(manifest["threads"]),
                      bool(manifest["fork"]), int(manifest["landlock"]))

    def tasks():
        for line in sys.stdin:
            if line.strip():
                yield Task.from_json(json.loads(line))

    def done(result):
        print(json.dumps({"done": result.student, "score": result.score, "max": result.max_score}), flush=True)

    judge_loop(tasks(), sandbox, manifest["out_dir"], done, bool(manifest.get("notebook")))
    return 0


def _run_parallel(tasks, sandbox, out_dir, jobs, on_done, notebook=False):
    """Feed tasks to ``jobs`` judge processes, two outstanding each; collect their reports.

    A judge that dies has its students graded once more by a fresh judge, then failed with the reason.
    """
    with tempfile.TemporaryDirectory(prefix="mha-pe-grade-") as tmp:
        manifest = Path(tmp) / "manifest.json"
        manifest.write_text(json.dumps({"mode": sandbox.mode, "note": sandbox.note, "out_dir": str(out_dir),
                                        "threads": sandbox.threads, "limits": asdict(sandbox.limits),
                                        "fork": sandbox.fork, "landlock": sandbox.landlock,
                                        "notebook": notebook}))
        env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
        pending = list(tasks)
        children, selector, assigned, attempts = [], selectors.DefaultSelector(), {}, {}

        def start_child():
            child = subprocess.Popen([sys.executable, "-m", "autograder", "_judge", str(manifest)], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
            children.append(child)
            assigned[child] = []
            selector.register(child.stdout, selectors.EVENT_READ, child)
            feed(child)  # two each: the one being graded and the one warming up
            feed(child)

        def feed(child):
            if pending:
                task = pending.pop(0)
                assigned[child].append(task)
                try:
                    child.stdin.write(json.dumps(task.to_json()) + "\n")
                    child.stdin.flush()
                except BrokenPipeError:  # it died; its end-of-output handling requeues the task
                    pass
            else:
                child.stdin.close()

        for _ in range(min(jobs, len(pending))):
            start_child()
        while selector.get_map():
            for key, _ in selector.select():
                child = key.data
                line = child.stdout.readline()
                if not line:  # the judge process ended: retry what it held once, on a fresh judge
                    selector.unregister(child.stdout)
                    for task in assigned[child]:
                        attempts[task.student] = attempts.get(task.student, 0) + 1
                        if attempts[task.student] < 2:
                            pending.insert(0, task)
                        else:
                            result = failed_result(task, sandbox, "the judge process stopped unexpectedly, twice")
                            on_done(save_result(result, out_dir))
                    assigned[child] = []
                    if pending:
                        start_child()
                    continue
                message = json.loads(line)
                finished = [task for task in assigned[child] if task.student == message.get("done")]
                for task in finished:
                    assigned[child].remove(task)
                    try:
                        on_done(records.load(result_path(out_dir, task.student)))
                    except (OSError, ValueError, KeyError):
                        on_done(failed_result(task, sandbox, "its result could not be read back"))
                if not child.stdin.closed:
                    feed(child)
        for child in children:
            child.wait()


def parse_shard(text):
    """``"I/N"`` -> ``(I, N)`` with 1 <= I <= N; KitError otherwise."""
    try:
        index, count = (int(part) for part in str(text).split("/"))
    except ValueError:
        raise KitError(f"--shard must look like I/N (for example 2/4), got {text!r}") from None
    if not 1 <= index <= count:
        raise KitError(f"--shard {text}: I must be between 1 and N")
    return index, count


SHARD_BY = ("index", "hash")


def in_shard(student, shard):
    """Whether ``student`` belongs to shard ``(I, N)`` by a stable hash of the id, the same on every machine and
    however the class grows (for classes collected over time)."""
    index, count = shard
    return int(hashlib.sha256(student.encode("utf-8")).hexdigest(), 16) % count == index - 1


def shard_students(students, shard, by="index"):
    """The share of ``students`` (sorted ``(id, folder)`` pairs) that shard ``(I, N)`` grades: every N-th of the
    sorted list (``index``: shards differ in size by one at most; every shard must see the same class) or by
    :func:`in_shard` (``hash``)."""
    if by not in SHARD_BY:
        raise KitError(f"--shard-by must be one of {', '.join(SHARD_BY)}, got {by!r}")
    index, count = shard
    if by == "hash":
        return [(student, folder) for student, folder in students if in_shard(student, shard)]
    return [pair for position, pair in enumerate(students) if position % count == index - 1]


def grade_class(class_dir, out_dir, jobs=1, sandbox_mode="auto", resume=False, emit=print, progress=None,
                limits=None, fork=True, skip_notebook=False, shard=None, shard_by="index"):
    """The ``grade`` command. Returns the list of SubmissionResults of the whole class (or of its shard)."""
    if jobs < 1:
        raise KitError(f"--jobs must be at least 1, got {jobs}")
    students = discover(class_dir, out_dir)
    if shard is not None:
        students = shard_students(students, shard, shard_by)
    clashes = submissions.colliding([student for student, _ in students])
    if clashes:  # their outputs would overwrite another student's: refused, said, and the class goes on
        emit(f"WARNING: not graded, their ids map to the same file name as another student's: "
             f"{', '.join(sorted(ascii(student) for student in clashes))}")
        students = [(student, folder) for student, folder in students if student not in clashes]
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise KitError(f"--out is not a folder: {out_dir}")
    sandbox = choose_sandbox(sandbox_mode, limits, fork=fork)
    if not sandbox.isolated:
        emit(f"WARNING: {sandbox.note}")
    elif sandbox.mode == "uid":
        emit(f"sandbox: uid ({sandbox.note})")
        if not sandbox.landlock:  # nothing else keeps a worker's user from reading them
            out_dir.mkdir(parents=True, exist_ok=True)
            lock_instructor_folders([paths.SOLUTIONS_DIR, paths.REPO_ROOT / "autograder" / "hidden_tests",
                                     paths.REPO_ROOT / "tests", out_dir, Path(class_dir)])
    grader = submissions.grader_fingerprint()
    tasks, kept = [], []
    for student, folder in students:
        intake = submissions.read_submission(folder, notebook=not skip_notebook)
        files = dict(intake.files)
        if not skip_notebook:  # the notebook is part of what was graded
            files["notebook"] = intake.notebook if intake.notebook is not None else b"none"
        task = Task(student, str(folder), submissions.fingerprint(files, grader + ("" if skip_notebook else "+nb")))
        path = result_path(out_dir, student)
        if resume and path.exists():
            try:
                previous = records.load(path)
            except (ValueError, KeyError, OSError):
                previous = None
            if previous is not None and previous.fingerprint == task.fingerprint:
                kept.append(previous)
                continue
        tasks.append(task)
    if kept:
        emit(f"--resume: {len(kept)} student(s) unchanged since their last grading, kept")
    bar = progress or Progress(len(tasks), "grading")
    graded = []

    def on_done(result):
        graded.append(result)
        bar.advance(f"{result.student}: {result.score:g}/{result.max_score:g}")

    started = time.monotonic()
    if jobs == 1 or len(tasks) <= 1:
        judge_loop(iter(tasks), sandbox, out_dir, on_done, not skip_notebook)
    else:
        _run_parallel(tasks, sandbox, out_dir, jobs, on_done, not skip_notebook)
    bar.close()
    if not skip_notebook and graded:  # nbgrader's database: the system of record formgrader reads
        try:
            nbgrader_record.record(nbgrader_record.course_dir(out_dir), graded)
        except Exception as error:  # noqa: BLE001 - the grades stand in results/; say what went wrong
            emit(f"WARNING: the nbgrader course could not be updated ({type(error).__name__}: {error})")
    class_results = sorted(kept + graded, key=lambda result: result.student)
    if shard is not None:  # what `merge` needs to check that the shards fit together
        records.write_atomic(out_dir / SHARD_FILE, json.dumps({"shard": shard[0], "of": shard[1],
                                                                "students": [r.student for r in class_results]}))
    write_reports(class_results, out_dir)
    emit(f"graded {len(graded)} submission(s) in {time.monotonic() - started:.1f} s "
         f"(sandbox: {sandbox.mode}); results in {out_dir}")
    return class_results
