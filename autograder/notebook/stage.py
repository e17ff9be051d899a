"""The Check Your Understanding notebook, graded like the code: run by a worker, checked by the judge.

The judge reads the student's notebook with nbformat (trusted code, the
student's bytes as data) and sends the worker only cell sources: the
student's code cells in their order, with the locked cells restored from the
release and the autograded test cells left out. After the last cell, each
autograded check runs HERE, from the SOURCE notebook's cell of that
``grade_id`` (its hidden tests included; the student's copy of a test cell is
never used), in a namespace built from the notebook's names fetched as data.
A notebook function is called through the worker, like the code's functions;
anything that is not data stands in as :class:`NotData`, which fails the
check that touches it with a clear reason. No object the notebook made is
ever live in the judge, so an answer whose ``__eq__`` is always true, an
input transformer or a ``pre_run_cell`` hook changes nothing here.

Shapes: ``NotebookOutcome.tests`` holds one TestResult per autograded check (group
``notebook``) and one per written answer (group ``written``; ``pending``
until graded in formgrader, 0 when unchanged from the release, as nbgrader
scores it); ``NotebookOutcome.executed`` is the notebook formgrader shows (nbformat
v4, outputs capped, test cells as released plus the verdict, Markdown
escaped).
"""

import time
from dataclasses import replace

from ..judge.failures import bounded
from ..records.notebook_groups import pending_points
from ..records.results import GraderFailure, NotebookSummary
from .cells import empty_outcome, grade_notebook
from .checks import load_checks


def grade_into(result, intake, sandbox, launch, out_dir, lesson, worker=None):
    """``result`` (the code's) with the notebook of ``lesson`` (an Assignment) graded and its tests added, and its
    notebooks written to the nbgrader course; never raises. ``launch()`` starts a worker over the student's
    module files (forked, IPython preloaded); ``worker``: one it started ahead (checked before its first use)."""

    from . import nbgrader_record
    from ..judge.remote import BACKSTOP, RemoteSubmission
    from ..intake.naming import nbgrader_safe_name

    assignment = load_checks(lesson.source_notebook(), lesson.released_notebook())
    name = lesson.notebook
    problem = intake.problems.get("notebook", "missing")
    why_missing = f"no {name} in the submission" if problem == "missing" else f"{name} was not used: {problem}"
    remote = RemoteSubmission(sandbox, launch, lesson.contract, worker=worker, files=intake.files)
    remote.budget = sandbox.limits.notebook_seconds  # CPU seconds; the wall clock only backs it up
    remote.deadline = time.monotonic() + BACKSTOP * sandbox.limits.notebook_seconds
    started = time.monotonic()
    try:
        outcome = grade_notebook(intake.notebook, why_missing, remote, sandbox.limits, assignment)
    except Exception as error:  # noqa: BLE001 - the grader's own fault: this notebook's points, said, never more
        outcome = empty_outcome(assignment, f"the notebook could not be graded (grader error {type(error).__name__})")
    finally:
        remote.close()
    if remote.busy:  # the machine's fault, not the notebook's: the whole student is graded again
        failure = GraderFailure("machine_busy", bounded(remote.busy, 300))
        return replace(result, tests=(), notes=result.notes + (failure.reason,),
                       grader_failures=result.grader_failures + (failure,))
    nbid = nbgrader_safe_name(result.student)
    notes = list(outcome.notes) + remote.events
    try:
        nbgrader_record.write_notebooks(nbgrader_record.course_dir(out_dir), lesson, nbid,
                                        intake.notebook if outcome.executed is not None else None, outcome.executed)
    except Exception as error:  # noqa: BLE001 - the notebook's files only: the code's points and this record stand
        notes.append(f"the executed notebook could not be written ({type(error).__name__})")
    summary = NotebookSummary(id=nbid, pending_manual=float(pending_points(outcome.tests)),  # a float, as ever
                              manual_max=sum(assignment.written.values()),
                              seconds=round(time.monotonic() - started, 3), reason=outcome.reason or "",
                              output=bounded(remote.output_text(), 16 << 10))
    notes = [bounded(note, 300) for note in notes][:10]
    unusable = {"notebook": bounded(problem, 300)} if intake.notebook is None else {}  # as a value, for triage
    return replace(result, tests=result.tests + tuple(outcome.tests), notebook=summary,
                   notes=result.notes + tuple(notes), intake_problems={**result.intake_problems, **unusable},
                   output="\n".join(filter(None, [result.output, *notes])))
