"""``python -m autograder grade``: grade every student folder of a class and write the reports.

Data flows one way: student folder -> staged files -> worker (sandbox) ->
judge -> ``results/<student>.json`` -> reports. The steps live in their own
modules: :mod:`~autograder.commands.planning` (whom to grade: discovery, shards,
``--resume``), :mod:`~autograder.commands.judge_loop` (grading in this process, ``--jobs
1``), :mod:`~autograder.commands.judge_pool` (``_judge`` child processes, ``--jobs N``)
and :mod:`~autograder.notebook.nbgrader_record` (the notebook scores into nbgrader's
database once the class is graded); this one runs them in order.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
from collections.abc import Callable, Iterable
from pathlib import Path

from ..lesson import assignment as assignments
from ..sandbox import core_pairing
from ..notebook import nbgrader_record
from ..records import seal
from ..records import triage
from ..lesson.assignment import Assignment
from .judge_loop import grader_error, judge_loop, record_failure
from ..errors import KitError
from .handins import at_deadlines, match_roster
from .judge_pool import grade_in_parallel
from ..intake.deadlines import Deadlines
from ..intake.roster import Roster
from .machine_load import LoadWatch
from .planning import discover, plan, shard_students, without_clashes, write_shard_file
from .progress import Progress
from ..records.results import SubmissionResult
from ..reports.drawer import Drawer
from ..sandbox.head_start import HeadStart
from ..sandbox.isolation import Limits, Requested, Sandbox, choose_sandbox, lock_instructor_folders


# The kit's own test folders: instructor-only data (hostile samples, fixtures) a confined worker may not read.
TEST_FOLDERS = [Path(__file__).resolve().parents[2] / "tests"]


def _sandbox(mode: str, limits: Limits | None, fork: bool, out_dir: Path, class_dir: Path,
             emit: Callable[[str], None], assignment: Assignment, unisolated_ok: bool = False) -> Sandbox:
    """The sandbox to grade in (never none unless asked for by name, or ``unisolated_ok``), said when it is
    weaker than bwrap."""
    sandbox = choose_sandbox(mode, limits, fork=fork, unisolated_ok=unisolated_ok)
    if not sandbox.isolated:
        emit(f"WARNING: {sandbox.note}")
    elif sandbox.mode == "uid":
        emit(f"sandbox: uid ({sandbox.note})")
        if not sandbox.landlock:  # nothing else keeps a worker's user from reading them
            out_dir.mkdir(parents=True, exist_ok=True)
            lock_instructor_folders([*assignment.instructor_folders(), *TEST_FOLDERS, out_dir, class_dir])
    return sandbox


def warm_reporting(notebook: bool) -> None:
    """Import what the end of a run needs (the reports' modules; nbgrader's database layer when notebooks are
    graded) while the zygote imports torch, before this process imports it: seconds off the run's end (the
    charts are the drawer's, :mod:`autograder.reports.drawer`). Only a head start: a failure here is
    left to the real use, which says it as it always did (the class is graded all the same)."""
    try:
        importlib.import_module("autograder.reports")  # for its start-up cost

        if notebook:
            nbgrader_record.warm()
    except Exception:  # noqa: BLE001 - see above
        pass


def student_reports(result: SubmissionResult, out_dir: Path, written: set[str]) -> SubmissionResult:
    """Write ``result``'s own reports (its feedback) and add its student to ``written``; the fault barrier: an
    exception while writing them leaves a ``record_failed`` record in place of the student's (listed under
    "Needs a look", regraded by ``--resume``), returned instead, whose own reports are then tried once. Only the
    reports' import failing (the whole class's trouble) leaves them to the end of the run, which says why."""
    try:
        from ..reports import write_student_reports  # imported while the run waited (warm_reporting)
    except Exception:  # noqa: BLE001 - see above
        return result
    try:
        write_student_reports(result, out_dir)
    except Exception as error:  # noqa: BLE001 - this student's record, never the end of the class
        result = record_failure(result, out_dir, f"their reports could not be written: {grader_error(error)}")
        with contextlib.suppress(Exception):  # a minimal record's feedback: if even that fails, the record says why
            write_student_reports(result, out_dir)
    written.add(result.student)
    return result


def grade_class(class_dir: str | Path, out_dir: str | Path, jobs: int = 1, sandbox_mode: Requested = "auto",
                resume: bool = False, emit: Callable[[str], None] = print, progress: Progress | None = None,
                limits: Limits | None = None, fork: bool = True, skip_notebook: bool = False,
                shard: tuple[int, int] | None = None, shard_by: str = "index",
                assignment: Assignment | str | Path | None = None, unisolated_ok: bool = False,
                roster: Roster | None = None, deadlines: Deadlines | None = None, regrade: Iterable[str] = ()
                ) -> list[SubmissionResult]:
    """The ``grade`` command: grade ``assignment`` (an Assignment or a descriptor's path; the kit's lesson by
    default). Returns the list of SubmissionResults of the whole class (or of its shard). Student code runs
    isolated unless ``sandbox_mode`` is ``"none"``; ``unisolated_ok`` lets ``auto`` fall back to none (the demo
    and ``validate``, on the kit's own material). ``roster``: who should hand in (:mod:`.handins`);
    ``deadlines``: grade each clone's commit at its student's deadline, late work under its policy;
    ``regrade``: ids graded again even where ``resume`` would keep their records (KitError for an unknown id)."""
    if jobs < 1:
        raise KitError(f"--jobs must be at least 1, got {jobs}")
    assignment = assignments.resolve(assignment)
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise KitError(f"--out is not a folder: {out_dir}")
    students = discover(class_dir, out_dir, assignment.contract)
    students, handins = match_roster(students, out_dir, roster, emit)
    regrade = frozenset(regrade)
    unknown = sorted(regrade - {student for student, _ in students})
    if unknown:
        raise KitError(f"not a student of this class: {', '.join(map(ascii, unknown))}")
    if shard is not None:
        students = shard_students(students, shard, shard_by)
    students = without_clashes(students, emit)
    students, handins = at_deadlines(students, handins, out_dir, deadlines, emit)
    # The zygote now, in the sandbox the check below picks if bubblewrap works: its torch import is most of the
    # run's start-up, and overlaps the check, the plan and the judge's start-up instead of following them.
    skip_notebook = skip_notebook or assignment.notebook is None
    with HeadStart.start(sandbox_mode, limits, fork, assignment, lend=jobs if jobs > 1 else 0,
                         notebook=not skip_notebook) as head_start:
        sandbox = _sandbox(sandbox_mode, limits, fork, out_dir, Path(class_dir), emit, assignment, unisolated_ok)
        head_start.keep_for(sandbox)
        seal.ready()  # every record is sealed as it is written
        tasks, kept = plan(students, out_dir, assignment, resume, notebook=not skip_notebook, emit=emit,
                           sandbox=sandbox.mode, handins=handins, regrade=regrade)
        if kept:
            emit(f"--resume: {len(kept)} student(s) unchanged since their last grading, kept")
        bar = progress or Progress(len(tasks), "grading")
        graded, written = [], set()

        def on_done(result: SubmissionResult) -> None:
            # The student's own feedback now, from the record just written (with --jobs N, while the judges grade on):
            # less left for the run's end.
            result = student_reports(result, out_dir, written)
            graded.append(result)
            bar.advance(f"{result.student}: {result.score:g}/{result.max_score:g}")

        watch = LoadWatch()  # timings mean little without the load they ran under
        meanwhile = functools.partial(warm_reporting, notebook=not skip_notebook)
        drawer = Drawer.start()  # forked before this process imports torch (a small process then), it warms up at once
        try:
            if jobs == 1 or len(tasks) <= 1:
                judge_loop(iter(tasks), sandbox, out_dir, on_done, assignment, not skip_notebook, meanwhile,
                           core=core_pairing.core_for(0, 1, sandbox.threads), head_start=head_start)
            else:
                grade_in_parallel(tasks, sandbox, out_dir, jobs, on_done, assignment, not skip_notebook,
                                  meanwhile=meanwhile, head_start=head_start)
            bar.close()
            if not skip_notebook and graded:
                nbgrader_record.record_class(out_dir, graded, assignment, emit)
            class_results = sorted([student_reports(result, out_dir, written) for result in kept] + graded,
                                   key=lambda result: result.student)
            if shard is not None:
                write_shard_file(out_dir, shard, [result.student for result in class_results])
            from ..reports import write_reports  # imported while the run waited (warm_reporting), not before

            write_reports(class_results, out_dir, drawer, written)
        finally:
            drawer.close()
        load = watch.finish()
        emit(f"graded {len(graded)} submission(s) in {load.seconds:.1f} s: {load.describe(len(graded), jobs)}; "
             f"sandbox: {sandbox.mode}; results in {out_dir}")
        # Whom to look at, and the written answers left to grade as formgrader holds them now (a TA may have graded
        # some since the records were written): counted only, the records and scores stay as graded.
        from ..notebook import course_grades

        for line in triage.summary(course_grades.as_graded_now(class_results, out_dir, assignment, emit)):
            emit(line)
        return class_results
