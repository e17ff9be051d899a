"""Who needs a human, and why: read from the result records alone, the same for every view.

``grade`` ends with :func:`summary`, ``report.md`` lists :func:`needs_a_look` and :func:`manual_work`, and
``final-gradebook`` prints :func:`manual_line`: one pure function of the records behind all three, so the console,
the report and the final gradebook never disagree. Every decision reads the records' typed fields
(``grader_failures``, ``intake_problems``, ``notebook``, ``sandbox``, ``tries``, each test's ``status``), never a
note's words, which may quote what a submission chose to print.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, get_args

from .notebook_groups import WRITTEN, pending_points
from .results import SubmissionResult

# Most urgent first: the order of a student's reasons, and of the students in every list.
Kind = Literal[
    "unfinished",  # grading did not finish (no worker, machine busy, the grader's own error, even in writing the
    # student's record or reports): no grade yet, and grade --resume regrades them
    "grader_problem",  # the hidden tests could not all be collected: every score may be short
    "unisolated",  # graded with --sandbox none: not a grade of record
    "no_submission",  # on the roster, no folder: graded as an empty submission
    "not_on_roster",  # a folder that matches no roster line: graded under its own name
    "second_folder",  # more than one folder is this student's: one graded, the others named
    "alike_ids",  # ids that differ only in case, spacing, a copy suffix or a look-alike letter
    "commit",  # no commit graded at the deadline (not a clone, none by then, unreadable), or times run backwards
    "late",  # the commit graded is past the student's deadline: the late policy applied
    "later_commit",  # commits after the deadline exist: not graded
    "retried",  # graded more than once after a grader failure
    "stubs",  # the released stubs handed in unchanged
    "files_elsewhere",  # student files found outside the folder graded
    "files_missing",  # a student file is not there: its parts score 0
    "files_refused",  # intake refused a file or the folder (a link, too large, unreadable)
    "no_notebook",  # the notebook is missing or was refused
    "notebook_unused",  # a notebook was handed in but earned nothing automatically (unreadable, not run)
    "zero",  # a score of 0
    "check_crashed",  # a check could not use an answer (charged as a failure; worth a glance)
]
KINDS: tuple[Kind, ...] = get_args(Kind)
LABELS: dict[Kind, str] = {
    "unfinished": "not graded",
    "grader_problem": "grader problem",
    "unisolated": "graded without isolation (--sandbox none)",
    "no_submission": "no submission",
    "not_on_roster": "not on the roster",
    "second_folder": "more than one folder",
    "alike_ids": "an id that looks like another's",
    "commit": "commit",
    "late": "late",
    "later_commit": "pushed after the deadline",
    "retried": "graded again after a grader failure",
    "stubs": "stubs handed in unchanged",
    "files_elsewhere": "student files elsewhere in the folder",
    "files_missing": "missing",
    "files_refused": "refused",
    "no_notebook": "no notebook",
    "notebook_unused": "notebook earned nothing automatically",
    "zero": "a score of 0",
    "check_crashed": "a check could not use an answer",
}
NOTEBOOK_KEY = "notebook"  # intake_problems' key for the notebook (the others are module names, and "folder")
SUMMARY_LIMIT = 20  # students named on the console; report.md names them all


@dataclass(frozen=True)
class Reason:
    """One reason a student needs a human: its kind and the details in the kit's words (file names, failure
    kinds and the grader's reasons; instructor only, never shown to a student)."""

    kind: Kind
    detail: str = ""

    def __str__(self) -> str:
        return f"{LABELS[self.kind]}: {self.detail}" if self.detail else LABELS[self.kind]


@dataclass(frozen=True)
class Flagged:
    """A student who needs a look, with every reason, most urgent first."""

    student: str
    reasons: tuple[Reason, ...]

    def why(self, leave_out: frozenset[str] = frozenset()) -> str:
        """The reasons in one line (``leave_out``: kinds said once for the whole class instead)."""
        return "; ".join(str(reason) for reason in self.reasons if reason.kind not in leave_out)


@dataclass(frozen=True)
class ManualWork:
    """Written answers still to be graded by hand: their points, how many answers, and over how many students."""

    points: float
    answers: int
    students: int


def reasons(result: SubmissionResult) -> tuple[Reason, ...]:
    """Why ``result``'s student needs a human (``()`` when nothing does), most urgent first."""
    found: list[Reason] = []
    unfinished = result.unfinished
    if unfinished is not None:
        found.append(Reason("unfinished", f"{unfinished.kind}: {unfinished.reason}; regrade with grade --resume"
                            if unfinished.reason else f"{unfinished.kind}; regrade with grade --resume"))
    suite = [failure.reason for failure in result.grader_failures if failure.kind == "suite_problem"]
    if suite:
        found.append(Reason("grader_problem", "; ".join(suite)))
    if not result.isolated:
        found.append(Reason("unisolated"))
    found += _handin_reasons(result)
    if result.tries > 1:
        found.append(Reason("retried", f"{result.tries} tries"))
    problems = {what: why for what, why in result.intake_problems.items() if what != NOTEBOOK_KEY}
    missing = sorted(what for what, why in problems.items() if why == "missing")
    if missing:
        found.append(Reason("files_missing", ", ".join(f"{module}.py" for module in missing)))
    refused = sorted((what, why) for what, why in problems.items() if why != "missing")
    if refused:
        found.append(Reason("files_refused", "; ".join(
            f"{'the folder' if what == 'folder' else what + '.py'} ({why})" for what, why in refused)))
    if result.notebook is not None:
        if NOTEBOOK_KEY in result.intake_problems:
            why = result.intake_problems[NOTEBOOK_KEY]
            found.append(Reason("no_notebook", "" if why == "missing" else f"refused ({why})"))
        elif result.notebook.reason:
            found.append(Reason("notebook_unused", result.notebook.reason))
        elif result.handin is not None and result.handin.notebook_unchanged:
            found.append(Reason("notebook_unused", "handed in as released: no answer written"))
    if result.tests and unfinished is None and result.score == 0:
        found.append(Reason("zero", f"0 of {result.max_score:g}"))
    crashed = [failure for failure in result.grader_failures if failure.kind == "check_crashed"]
    if crashed:
        found.append(Reason("check_crashed", f"{len(crashed)} check(s)"))
    if result.handin is not None and result.handin.absent:  # nothing handed in: the rest follows from it
        found = [reason for reason in found if reason.kind in ABSENT_KEEPS]
    return tuple(sorted(found, key=lambda reason: KINDS.index(reason.kind)))


ABSENT_KEEPS = frozenset({"unfinished", "grader_problem", "unisolated", "no_submission", "retried"})


def _handin_reasons(result: SubmissionResult) -> list[Reason]:
    """What the hand-in itself says (roster, folders, commit, lateness, stubs, copies elsewhere)."""
    handin = result.handin
    if handin is None:
        return []
    found = []
    if handin.absent:
        found.append(Reason("no_submission"))
    if handin.roster is False:
        found.append(Reason("not_on_roster", "graded under the folder's name"))
    if handin.also:
        found.append(Reason("second_folder", f"graded {handin.folder or result.student!r}; not graded: "
                                             + ", ".join(map(repr, handin.also))))
    if handin.alike:
        found.append(Reason("alike_ids", "; ".join(map(repr, handin.alike)) + ": the same student?"))
    commit = handin.commit
    if commit is not None and commit.problem:
        found.append(Reason("commit", commit.problem))
    elif commit is not None and commit.reordered:
        found.append(Reason("commit", "commit times run backwards in the history (rewritten?): check GitHub's "
                                      "push times"))
    if handin.late_days:
        found.append(Reason("late", f"{handin.late_days} day(s), -{handin.late_percent:g}% "
                                    f"(-{result.penalty:g} points); commit {commit.sha[:10] if commit else ''}"))
    if commit is not None and commit.later:
        found.append(Reason("later_commit", f"{commit.later} commit(s) after the one graded"))
    if handin.stubs and not handin.absent:
        found.append(Reason("stubs", ", ".join(f"{module}.py" for module in handin.stubs)))
    if handin.elsewhere:
        found.append(Reason("files_elsewhere", f"graded {handin.layout}/; not graded: " + "; ".join(
            f"{copy.path} ({_copy_words(copy)})" for copy in handin.elsewhere)))
    return found


def _copy_words(copy) -> str:
    words = ["the same as the graded one" if copy.same else "different from the graded one"]
    if copy.stub:
        words.append("the released stub")
    if copy.newer:
        words.append("newer")
    return ", ".join(words)


def needs_a_look(results: Iterable[SubmissionResult]) -> list[Flagged]:
    """Every student who needs a human, most urgent first (then by id)."""
    flagged = [Flagged(result.student, found) for result in results if (found := reasons(result))]
    return sorted(flagged, key=lambda item: (KINDS.index(item.reasons[0].kind), item.student))


def manual_work(results: Iterable[SubmissionResult]) -> ManualWork:
    """The written answers still pending in ``results`` (an answer left as released is not pending: it scores 0,
    as nbgrader scores it). The commands pass the records as the course database holds them now
    (``notebook.course_grades``, a layer above): formgrader's grading since, counted."""
    points, answers, students = 0.0, 0, 0
    for result in results:
        pending = [test for test in result.tests if test.group == WRITTEN and test.status == "pending"]
        points += pending_points(pending)
        answers += len(pending)
        students += bool(pending)
    return ManualWork(round(points, 6), answers, students)


def manual_line(work: ManualWork) -> str:
    """The manual work in one sentence, the same on the console, in report.md and from final-gradebook."""
    if not work.answers:
        return "Manual grading: no written answer is waiting."
    return (f"Manual grading: {work.points:g} written points ({work.answers} answers) from {work.students} "
            f"student(s) await grading in formgrader.")


def printable(text: str) -> str:
    """``text`` safe for a terminal: a character that is not printable (a control character, an escape
    sequence's start) is shown as its escape, so an id cannot move the cursor or recolour the console."""
    return "".join(char if char.isprintable() else ascii(char)[1:-1] for char in str(text))


def summary(results: list[SubmissionResult], limit: int = SUMMARY_LIMIT) -> list[str]:
    """The console's closing lines: who needs a look and why (a reason every student shares is said once),
    then the manual work. At most ``limit`` students are named; report.md names them all."""
    flagged = needs_a_look(results)
    lines = []
    everyone = frozenset(kind for kind in KINDS if len(flagged) == len(results) > 1
                         and all(any(reason.kind == kind for reason in item.reasons) for item in flagged))
    lines += [f"every student: {LABELS[kind]}" for kind in KINDS if kind in everyone]
    named = [item for item in flagged if item.why(everyone)]
    if named:
        lines.append(f"needs a look: {len(named)} of {len(results)} student(s)")
        lines += [f"  {printable(item.student)}: {printable(item.why(everyone))}" for item in named[:limit]]
        if len(named) > limit:
            lines.append(f"  ... and {len(named) - limit} more: see report.md")
    elif results and not everyone:
        lines.append(f"needs a look: nobody of {len(results)} student(s)")
    work = manual_work(results)
    if any(result.notebook is not None for result in results) or work.answers:
        lines.append(manual_line(work))
    return lines
