"""What a student is told about their grade, as data: the one decision behind every feedback format.

``feedback.py`` (Markdown) and ``feedback_text.py`` (plain text, for e-mail or an LMS) each format the same
:class:`FeedbackView`, so the two never disagree about what is shown: visible checks in full, hidden ones only
as the concepts missed, written answers with their state and the grader's comment.

Whose words are whose matters for escaping: the kit's and the hidden tests' words are trusted; a notebook
check's output may quote a student's answer; a grader's comment is the instructor's own text, written in
formgrader and copied from the course database into the sealed record by ``final-gradebook``. Only a record's
output that *starts* with the kit's :data:`GRADED` line carries such a comment (:func:`instructor_comment`),
so no student text can pass for one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..intake.naming import safe_name
from ..records.notebook_groups import NOTEBOOK, NOTEBOOK_GROUPS, WRITTEN, pending_points
from ..records.results import SubmissionResult, TestResult, write_atomic
from .context import ReportRun
from .escape import file_text
# What final-gradebook writes into a test graded in formgrader, defined where it is written.
from ..notebook.course_grades import COMMENT, GRADED

SHOWN = ("visible", "after_due_date", "after_published")


def instructor_comment(test: TestResult) -> str:
    """The grader's comment on ``test`` as the grader wrote it ("" when none)."""
    if test.group in NOTEBOOK_GROUPS and test.output.startswith(GRADED + COMMENT):
        return test.output[len(GRADED + COMMENT):].strip()
    return ""


@dataclass(frozen=True)
class Check:
    """A visible check: its name, points, the idea it checks and what happened (when it failed), and the
    grader's comment where a grader scored it by hand."""

    name: str
    score: float
    max_score: float
    concept: str = ""
    happened: str = ""
    quotes_student: bool = False  # a notebook check's words may quote the student's answer: escape them
    comment: str = ""
    stood_in: tuple[str, ...] = ()  # parts it ran with a working stand-in for (they fail their own checks)

    def stand_in_words(self) -> str:
        """The line saying which parts this check ran with stand-ins for ("" when none)."""
        if not self.stood_in:
            return ""
        return (f"checked with a working stand-in for {', '.join(self.stood_in)} (yours fails its own checks), so "
                "these points are your other code's own")


# The "Fix first" section's opening, in both formats.
FIX_FIRST_INTRO = ("These parts fail their own checks, and other checks use them. Checks of the code built on them "
                   "ran with a working stand-in in their place, so that code earns its own points; checks that need "
                   "the part itself wait for it (not earned until it works). Fix these parts first:")


@dataclass(frozen=True)
class FixFirst:
    """A part that fails its own checks and that other checks use."""

    part: str
    waiting: int  # checks that wait for it (not checked yet)
    points: float  # their points
    stood_in: int  # checks of the code built on it that ran with a stand-in for it

    def words(self) -> str:
        said = [f"{self.waiting} further check(s), {self.points:g} points, wait for it"] if self.waiting else []
        if self.stood_in:
            said.append(f"{self.stood_in} check(s) of the code built on it ran with a working stand-in for it")
        return "; ".join(said)


@dataclass(frozen=True)
class Written:
    """A written answer: its name, state ("still to be graded" or "3/4"), the kit's words, the grader's comment."""

    name: str
    state: str
    text: str
    comment: str


@dataclass(frozen=True)
class FeedbackView:
    student: str
    score_line: str
    unfinished: bool
    notices: tuple[str, ...]
    handin: tuple[str, ...]  # what was graded and whether late: may quote the student's own folder names
    parts: tuple[tuple[str, str], ...]  # (part, its points in words: "10 / 22", "13 points still to be graded")
    fix_first: tuple[FixFirst, ...]
    failed: tuple[Check, ...]
    passed: tuple[Check, ...]
    missed: tuple[str, ...]  # concepts of hidden checks missed, each once
    hidden: int  # hidden checks counted in the score
    hidden_passed: int  # of which passed
    shared: tuple[tuple[str, int], ...]  # (a raised error's type and place, how many failed checks it stopped)
    uncounted: int  # checks this machine could not run (the GPU check without CUDA)
    notebook_reason: str
    written: tuple[Written, ...]
    pending: float  # written points still to be graded
    written_total: float


def score_line(result: SubmissionResult) -> str:
    """The header's score. Written answers a human has not graded yet are neither earned nor lost: they are named
    apart ("Score: 111 / 111 so far · 13 written points still to be graded"), not counted as missing points."""
    pending = pending_points(test for test in result.tests if test.group == WRITTEN)
    late = f" · late penalty of {result.penalty:g} included" if result.penalty else ""
    if not pending:
        return f"Score: {result.score:g} / {result.max_score:g}{late}"
    return (f"Score: {result.score:g} / {result.max_score - pending:g} so far · {pending:g} written points still to "
            f"be graded{late}")


def handin_lines(result: SubmissionResult) -> tuple[str, ...]:
    """What the student is told about their hand-in: nothing found, the commit graded, lateness and its cost,
    later commits, files left ungraded elsewhere in their folder."""
    handin = result.handin
    if handin is None:
        return ()
    if handin.absent:
        return ("No submission was found for you, so every check scored 0. If you did hand in, tell your "
                "instructor where.",)
    lines = []
    commit = handin.commit
    if commit is not None and commit.sha:
        lines.append(f"Graded: your commit {commit.sha[:10]} of {commit.time}, the last one by your deadline "
                     f"({commit.deadline}) or the end of the late period." if not handin.late_days else
                     f"Graded: your commit {commit.sha[:10]} of {commit.time}, after your deadline "
                     f"({commit.deadline}).")
    elif commit is not None and "nothing graded" in commit.problem:
        lines.append(f"No commit was made by your deadline ({commit.deadline}): nothing was graded.")
    if handin.late_days:
        lines.append(f"Late by {handin.late_days} day(s): {handin.late_percent:g}% of the maximum, "
                     f"{result.penalty:g} points, is taken off (the score above includes it).")
    if commit is not None and commit.later:
        lines.append(f"{commit.later} later commit(s) came after the deadline and were not graded.")
    if handin.stubs and not handin.elsewhere:
        lines.append("Some files are the starting files as released, unchanged: "
                     + ", ".join(f"{module}.py" for module in handin.stubs) + ".")
    ungraded = [copy.path for copy in handin.elsewhere if not copy.same]
    if ungraded:
        lines.append(f"Your files were read from {handin.layout}/. These copies elsewhere in your repository were "
                     f"not graded: {', '.join(ungraded)}.")
    return tuple(lines)


def _concept(test: TestResult) -> str:
    """The idea a check tests: its record's ``concept`` (a hidden test's), else its whole output (a notebook's)."""
    return (test.concept or test.output).strip()


def _check(test: TestResult) -> Check:
    comment = instructor_comment(test)
    if comment:
        return Check(test.name, test.score, test.max_score, GRADED, comment=comment)
    if test.concept:  # a hidden test: the concept and what happened, kept apart in the record
        return Check(test.name, test.score, test.max_score, test.concept, test.happened, stood_in=test.stood_in)
    return Check(test.name, test.score, test.max_score, test.output.strip(), "", test.group == NOTEBOOK)


def part_points(result: SubmissionResult, group: str, score: float, top: float) -> str:
    """A part's points in the table: "10 / 22"; points a human has not graded yet are named as pending, never shown
    as lost ("13 points still to be graded", or "2 / 4, 9 points still to be graded")."""
    pending = pending_points(test for test in result.tests if test.group == group)
    if not pending:
        return f"{score:g} / {top:g}"
    if pending >= top:
        return f"{pending:g} points still to be graded"
    return f"{score:g} / {top - pending:g}, {pending:g} points still to be graded"


def _shared_causes(checks: list[TestResult]) -> tuple[tuple[str, int], ...]:
    """One likely cause behind several failed checks: the same error type raised at the same line of the
    student's code (the record's typed cause, never its words), with how many checks it failed."""
    counts: dict[str, int] = {}
    for test in checks:
        cause = test.cause
        if test.status == "failed" and cause is not None and cause.kind == "raised" and cause.where:
            key = f"{cause.error_type or 'an error'} at {cause.where}"
            counts[key] = counts.get(key, 0) + 1
    return tuple((key, count) for key, count in counts.items() if count > 1)


def shared_words(cause: str, count: int) -> str:
    """The feedback's line for one cause shared by several failed checks (both formats)."""
    return f"{count} failed checks stop at the same error, {cause}: one fix there may mend them all"


def hidden_words(view: FeedbackView) -> str:
    """The feedback's line on the hidden checks (both formats): how many passed, where the others' ideas are."""
    failed = view.hidden - view.hidden_passed
    words = (f"Your score includes {view.hidden} further checks whose details are not shown: "
             f"{view.hidden_passed} passed")
    return words + (f", {failed} failed (the idea each one checks is under Also review)." if failed else ".")


def view(result: SubmissionResult) -> FeedbackView:
    """What ``result``'s student is shown (a pure function of the record)."""
    written = [test for test in result.tests if test.group == WRITTEN]
    checks = [test for test in result.tests if test.group != WRITTEN]
    blocked = [test for test in checks if test.status == "failed" and test.blocked_by]
    hidden = [test for test in checks if test.visibility not in SHOWN and test.counted]
    failed = tuple(_check(test) for test in checks if test.status == "failed" and test.visibility in SHOWN)
    passed = tuple(Check(test.name, test.score, test.max_score, comment=instructor_comment(test),
                         stood_in=test.stood_in)
                   for test in checks if test.status == "passed" and test.visibility in SHOWN)
    stood_in = [test for test in checks if test.stood_in]
    parts = dict.fromkeys([test.blocked_by for test in blocked] + [part for test in stood_in for part in test.stood_in])
    fix_first = tuple(FixFirst(part, len(mine), sum(test.max_score for test in mine),
                               sum(part in test.stood_in for test in stood_in))
                      for part in parts for mine in [[test for test in blocked if test.blocked_by == part]])
    return FeedbackView(
        student=result.student, score_line=score_line(result), unfinished=result.unfinished is not None,
        notices=tuple(result.notices), handin=handin_lines(result),
        parts=tuple((group, part_points(result, group, score, top))
                    for group, (score, top) in result.group_scores().items()),
        fix_first=fix_first, failed=failed, passed=passed,
        # Hidden checks stay unnamed, but the idea each one missed is what the student needs to learn.
        missed=tuple(dict.fromkeys(_concept(test) for test in hidden
                                   if test.status == "failed" and not test.blocked_by)),
        hidden=len(hidden), hidden_passed=sum(test.status == "passed" for test in hidden),
        shared=_shared_causes(checks), uncounted=sum(not test.counted for test in checks),
        notebook_reason=result.notebook.reason if result.notebook is not None else "",
        written=tuple(Written(test.name.removeprefix(f"{WRITTEN}: "),
                              "still to be graded" if test.status == "pending" else
                              f"{test.score:g}/{test.max_score:g}",
                              GRADED if instructor_comment(test) else test.output.partition(COMMENT)[0],
                              instructor_comment(test)) for test in written),
        pending=pending_points(written),
        written_total=sum(test.max_score for test in written))


def write_each(results: Sequence[SubmissionResult], out_dir: str | Path, suffix: str,
               render: Callable[[SubmissionResult], str], run: ReportRun | None = None) -> list[Path]:
    """Each student's feedback in one format (``render``) at ``feedback/<their id, made safe><suffix>``; the
    paths written, in order. No control character but line ends and tabs reaches the file (:func:`file_text`),
    whichever field brought it. In a run of the class reports (``run``), the students it has written already
    (``run.written``) are left as they are."""
    written = []
    for result in results:
        if run is not None and result.student in run.written:
            continue
        path = Path(out_dir) / "feedback" / f"{safe_name(result.student)}{suffix}"
        write_atomic(path, file_text(render(result)))
        written.append(path)
    return written
