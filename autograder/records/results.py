"""The one result record per student, in Gradescope's ``results.json`` form.

Frozen dataclasses with ``to_json`` / ``from_json`` and no rendering: every
report (gradebook, feedback, class report, Classroom, Gradescope) is a view
computed from these records.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, get_args

from . import seal as seals
from .handin import Handin
from ..errors import KitError
from ..intake.naming import safe_name
from ..sandbox.isolation import ISOLATED
from ..worker import text as texts

# "pending": a written answer not graded yet (0 points so far); "skipped": not run on this machine and counted
# nowhere (0 of 0).
Status = Literal["passed", "failed", "pending", "skipped"]
Visibility = Literal["visible", "hidden", "after_due_date", "after_published"]
VISIBILITIES: tuple[Visibility, ...] = get_args(Visibility)
# What broke on the grader's side. ``check_crashed`` is the kind a submission's data is expected to cause (a check
# raised on its answer): it never ends grading or changes the student's feedback. Only ``no_worker`` and
# ``machine_busy`` are retried: nothing a submission does leads to either.
FailureKind = Literal[
    "no_worker",  # no worker could be started: the grading machine's trouble, retried
    "machine_busy",  # a worker ready to run waited for a CPU until the wall-clock backstop: retried, never charged
    "grader_error",  # the grader's own exception while grading this student
    "judge_stopped",  # the judge process died holding this student, twice
    "result_lost",  # the judge reported the student done, but the result could not be read back
    "record_failed",  # the grader's own exception while saving this student's record or writing their reports
    "sandbox_fault",  # the sandbox lost a file intake read (a worker found it missing): never the student's
    "suite_problem",  # the hidden tests could not all be collected
    "check_crashed",  # a check raised something other than an assertion on this submission's answer
]
FAILURE_KINDS: tuple[FailureKind, ...] = get_args(FailureKind)
# The kinds after which this student's grading did not finish: the result holds no tests.
UNFINISHED: tuple[FailureKind, ...] = ("no_worker", "machine_busy", "grader_error", "judge_stopped", "result_lost",
                                       "record_failed", "sandbox_fault")
# What a pending written answer is called on Gradescope, which knows only passed and failed: said in its name, so the
# list of tests shows it without opening it.
PENDING_NAME = " (pending: graded by your instructor)"


@dataclass(frozen=True)
class GraderFailure:
    """A grader-side failure while grading one student; ``reason`` is for the instructor (never student text)."""

    kind: FailureKind
    reason: str = ""

    def __post_init__(self) -> None:
        if self.kind not in FAILURE_KINDS:
            raise ValueError(f"unknown grader failure kind {self.kind!r}")

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "reason": self.reason}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GraderFailure:
        return cls(kind=str(data["kind"]), reason=str(data.get("reason", "")))  # type: ignore[arg-type]


@dataclass(frozen=True)
class NotebookSummary:
    """How the student's notebook was graded (its tests are in the record's ``tests``)."""

    id: str  # the student's id in the nbgrader course (submission.nbgrader_safe_name)
    pending_manual: float = 0.0  # written-answer points still to be graded in formgrader
    manual_max: float = 0.0  # all written-answer points
    seconds: float = 0.0
    reason: str = ""  # why the notebook earned nothing automatically (missing, refused, not run), if it did not
    output: str = ""  # what the notebook's processes printed outside its cells: the instructor's view only

    KEYS = ("notebook_id", "notebook_pending_manual", "notebook_manual_max", "notebook_seconds", "notebook_reason",
            "notebook_output")

    def to_json(self) -> dict[str, Any]:
        """The ``extra_data`` keys of a result (flat, as nbgrader-facing tools read ``notebook_id``)."""
        data: dict[str, Any] = {"notebook_id": self.id, "notebook_pending_manual": self.pending_manual,
                                "notebook_manual_max": self.manual_max, "notebook_seconds": self.seconds}
        if self.reason:
            data["notebook_reason"] = self.reason
        if self.output:
            data["notebook_output"] = self.output
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> NotebookSummary:
        return cls(id=str(data["notebook_id"]), pending_manual=float(data.get("notebook_pending_manual", 0)),
                   manual_max=float(data.get("notebook_manual_max", 0)),
                   seconds=float(data.get("notebook_seconds", 0)), reason=str(data.get("notebook_reason", "")),
                   output=str(data.get("notebook_output", "")))


# Why a check failed, as a value: validate, feedback and reports read it, never the output's words.
CauseKind = Literal[
    "wrong_value",  # the answer came back and a check of it failed
    "wrong_shape",  # the answer came back with the wrong shape (rubric.WrongShape)
    "raised",  # the student's code raised an exception (``error_type`` at ``where``)
    "missing_file", "missing_name",  # a student file, or a name the tests need, is not there
    "import_failed",  # a student file could not be imported (``error_type`` at ``where``)
    "forbidden",  # the code used an API the part asks students to build (``apis``)
    "timeout",  # a call, or the whole submission, ran out of time
    "crashed",  # the process running the code stopped
    "bad_value",  # an answer of the wrong kind (no tensor, a malformed value)
    "not_checked",  # a part it needs fails first (``TestResult.blocked_by``)
    "not_run",  # this machine could not run it
    "check_crashed",  # the check could not use the answer
]
CAUSE_KINDS: tuple[CauseKind, ...] = get_args(CauseKind)


@dataclass(frozen=True)
class Cause:
    """Why one check failed: its ``kind``, and for code that raised its Python type name and place
    (``<file>.py:12``), for a forbidden API the APIs met. The judge's words only, never the submission's."""

    kind: CauseKind
    error_type: str = ""
    where: str = ""
    apis: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        record: dict[str, Any] = {"kind": self.kind}
        record.update({key: value for key, value in (("error_type", self.error_type), ("where", self.where))
                       if value})
        if self.apis:
            record["apis"] = list(self.apis)
        return record

    @classmethod
    def from_json(cls, data: Any) -> Cause | None:
        if not isinstance(data, dict) or data.get("kind") not in CAUSE_KINDS:
            return None
        apis = data.get("apis")
        return cls(kind=data["kind"], error_type=str(data.get("error_type", "")), where=str(data.get("where", "")),
                   apis=tuple(str(api) for api in apis) if isinstance(apis, list) else ())


@dataclass(frozen=True)
class TestResult:
    """One rubric line for one student."""

    __test__ = False  # a record, not a pytest test class

    name: str
    group: str
    score: float
    max_score: float
    status: Status
    output: str = ""
    visibility: Visibility = "visible"
    id: str = ""  # the hidden test's function name: stable across renames of its title
    blocked_by: str = ""  # not checked because this part fails first (rubric.NotChecked): fix it first
    charged_to: str = ""  # the rubric topic a blocked check is charged to (the part's), instead of its own
    # A hidden test's output is ``concept`` then "What happened: ``happened``"; both kept apart, with the
    # failure's ``cause``, so nothing downstream reads them back out of the words.
    concept: str = ""
    happened: str = ""
    cause: Cause | None = None
    # The parts this check ran with the lesson's stand-ins for (they fail their own checks): its points are its
    # own code's, earned or lost with a working part in place of the broken one.
    stood_in: tuple[str, ...] = ()

    @property
    def counted(self) -> bool:
        return self.status != "skipped"

    def to_json(self) -> dict[str, Any]:
        record = {
            "name": self.name,
            "score": self.score,
            "max_score": self.max_score,
            "status": "passed" if self.status == "passed" else "failed",  # Gradescope knows these two
            "output": self.output,
            "visibility": self.visibility,
            "tags": [self.group],
            "extra_data": {"id": self.id, **({"blocked_by": self.blocked_by, "charged_to": self.charged_to}
                                             if self.blocked_by else {})},
        }
        extra = record["extra_data"]
        extra.update({key: value for key, value in (("concept", self.concept), ("happened", self.happened)) if value})
        if self.cause is not None:
            extra["cause"] = self.cause.to_json()
        if self.stood_in:
            extra["stood_in"] = list(self.stood_in)
        if not self.counted:  # Gradescope knows only passed and failed; a 0/0 test without a status is neutral
            del record["status"]
            record["extra_data"]["counted"] = False
        if self.status == "pending":
            # Gradescope decides a test without a status from its points, so 0 of 2 would show as a red failure:
            # a written answer nobody has graded yet is 0 of 0 there, named as pending, and its real maximum
            # rides in extra_data (the record's own maximum is unchanged: from_json puts it back).
            del record["status"]
            record.update(name=self.name + PENDING_NAME, max_score=0)
            record["extra_data"].update(pending=True, max_score=self.max_score)
        return record

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TestResult:
        tags = data.get("tags") or ["other"]
        extra = data.get("extra_data") or {}
        status = "skipped" if extra.get("counted") is False else str(data.get("status", "failed"))
        name, top, output = str(data["name"]), data["max_score"], str(data.get("output", ""))
        concept, happened = str(extra.get("concept", "")), str(extra.get("happened", ""))
        if "concept" not in extra and "\nWhat happened: " in output:  # a record from before the fields: read once
            concept, _, happened = output.partition("\nWhat happened: ")
        if extra.get("pending"):  # as to_json wrote it for Gradescope (records before it kept name and maximum)
            status, name, top = "pending", name.removesuffix(PENDING_NAME), extra.get("max_score", top)
        return cls(
            name=name, group=str(tags[0]), score=float(data["score"]),
            max_score=float(top), status=status,
            output=output, visibility=str(data.get("visibility", "visible")),
            id=str(extra.get("id", "")), blocked_by=str(extra.get("blocked_by", "")),
            charged_to=str(extra.get("charged_to", "")), concept=concept, happened=happened,
            cause=Cause.from_json(extra.get("cause")),
            stood_in=_names(extra.get("stood_in")),
        )


def _names(value: Any) -> tuple[str, ...]:
    """A record's list of part names, as kept: strings only, bounded."""
    return tuple(str(name)[:100] for name in value[:20] if isinstance(name, str)) if isinstance(value, list) else ()


@dataclass(frozen=True)
class SubmissionResult:
    """Everything graded for one student; ``notes`` are grader-side remarks in words (sandbox off, crashes), and
    ``grader_failures`` the same failures as values: every decision reads these, never a note's text."""

    student: str
    tests: tuple[TestResult, ...] = ()
    execution_time: float = 0.0
    output: str = ""
    sandbox: str = "bwrap"  # the sandbox.Mode it was graded in
    fingerprint: str = ""
    notes: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)  # the submission's own output and messages (instructor)
    grader_failures: tuple[GraderFailure, ...] = ()
    notebook: NotebookSummary | None = None  # None when the notebook was not graded (``--skip-notebook``)
    notices: tuple[str, ...] = ()  # for the student, in the judge's words: shown at the top of the feedback
    # What intake could not use, as values: ``{module, "folder" or "notebook": why}``, "missing" when it is simply
    # not there (the notes name only refusals; who needs a human reads this).
    intake_problems: dict[str, str] = field(default_factory=dict)
    tries: int = 1  # times this run graded the student: more than one after a grader failure (retried, or a judge died)
    handin: Handin | None = None  # which folder and commit were graded, and whether late (None: not recorded)

    @property
    def earned(self) -> float:
        """The points the checks gave, before any late penalty."""
        return round(sum(test.score for test in self.tests), 6)

    @property
    def penalty(self) -> float:
        """The points a late hand-in costs: its share of the maximum, never more than was earned."""
        percent = self.handin.late_percent if self.handin is not None else 0.0
        return round(min(self.earned, self.max_score * percent / 100), 6) if percent else 0.0

    @property
    def score(self) -> float:
        return round(self.earned - self.penalty, 6)

    @property
    def max_score(self) -> float:
        return round(sum(test.max_score for test in self.tests), 6)

    @property
    def isolated(self) -> bool:
        """Whether the student's code ran in a sandbox that isolates it (not ``--sandbox none``)."""
        return self.sandbox in ISOLATED

    @property
    def unfinished(self) -> GraderFailure | None:
        """The grader-side failure that stopped this student's grading, if one did."""
        return next((failure for failure in self.grader_failures if failure.kind in UNFINISHED), None)

    def group_scores(self) -> dict[str, tuple[float, float]]:
        """``{group: (score, max_score)}`` in first-seen order."""
        groups = {}
        for test in self.tests:
            score, top = groups.get(test.group, (0.0, 0.0))
            groups[test.group] = (round(score + test.score, 6), round(top + test.max_score, 6))
        return groups

    def to_json(self) -> dict[str, Any]:
        extra = dict(self.extra, **(self.notebook.to_json() if self.notebook is not None else {}))
        return {
            "score": self.score,
            "execution_time": round(self.execution_time, 3),
            "output": self.output,
            "tests": [test.to_json() for test in self.tests],
            "extra_data": dict(extra, student=self.student, max_score=self.max_score, sandbox=self.sandbox,
                               fingerprint=self.fingerprint, notes=list(self.notes),
                               **({"notices": list(self.notices)} if self.notices else {}),
                               **({"intake_problems": dict(self.intake_problems)} if self.intake_problems else {}),
                               **({"tries": self.tries} if self.tries != 1 else {}),
                               **({"handin": self.handin.to_json()} if self.handin is not None else {}),
                               grader_failures=[failure.to_json() for failure in self.grader_failures]),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SubmissionResult:
        """The record of :meth:`to_json`; older records (without failures or a notebook summary) read as such."""
        extra = dict(data.get("extra_data") or {})
        student = str(extra.pop("student"))
        extra.pop("max_score", None)
        extra.pop(seals.FIELD, None)  # the seal is the file's, checked on the raw JSON (load_record)
        notebook = NotebookSummary.from_json(extra) if "notebook_id" in extra else None
        for key in NotebookSummary.KEYS:
            extra.pop(key, None)
        return cls(
            student=student,
            tests=tuple(TestResult.from_json(test) for test in data.get("tests", [])),
            execution_time=float(data.get("execution_time", 0.0)),
            output=str(data.get("output", "")),
            sandbox=str(extra.pop("sandbox", "bwrap")),
            fingerprint=str(extra.pop("fingerprint", "")),
            notes=tuple(str(note) for note in extra.pop("notes", [])),
            notices=tuple(str(notice) for notice in extra.pop("notices", [])),
            grader_failures=tuple(GraderFailure.from_json(item) for item in extra.pop("grader_failures", [])),
            intake_problems={str(what): str(why) for what, why in (extra.pop("intake_problems", None) or {}).items()},
            tries=int(extra.pop("tries", 1)),
            handin=Handin.from_json(extra.pop("handin", None)),
            notebook=notebook,
            extra=extra,
        )


def write_atomic(path: str | os.PathLike, text: str | bytes) -> None:
    """Write ``text`` (UTF-8, made valid text first: a lone surrogate becomes U+FFFD, never an exception; or bytes
    as they are) to ``path`` so that readers see the old file or the new one, never a part; with the mode an
    ordinary file would get (created 0666, the kernel applies the umask: ``umask 027`` lets a teaching team's
    group read the outputs)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text if isinstance(text, bytes) else texts.valid_text(text).encode("utf-8")
    while True:
        tmp = path.parent / f".tmp-{secrets.token_hex(8)}{path.suffix}"
        try:  # O_EXCL and O_NOFOLLOW: a file of its own, never one or a link already there
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
            break
        except FileExistsError:
            continue
    try:
        with open(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def valid_result(result: SubmissionResult) -> SubmissionResult:
    """``result`` with every text in it valid (:func:`~autograder.worker.text.valid_text`) and a note where one was
    not: the last check before a record is written (a worker's text is made valid where it enters the judge; this
    catches any way in that was missed). The same object when nothing needed it."""
    data, replaced = texts.valid_tree(result.to_json())
    if not replaced:
        return result
    fixed = SubmissionResult.from_json(data)
    return replace(fixed, execution_time=result.execution_time, notes=fixed.notes + (texts.NOTE,))


def save(result: SubmissionResult, path: str | os.PathLike) -> None:
    """Write ``result``'s record, sealed with the judge's key (only the judge and trusted rewrites save)."""
    write_atomic(path, record_text(seals.seal(result.to_json(), Path(path).name)))


def record_text(record: dict[str, Any]) -> str:
    """``record`` as ASCII JSON text (every other character escaped, so no text can fail to be written), one field
    per line and each item of a list field (a test) on a line of its own: as readable as an indented dump, and
    written by json's C encoder (an indented dump runs its pure-Python one, milliseconds a student)."""
    fields = []
    for key, value in record.items():
        if isinstance(value, list) and value:
            text = "[\n" + ",\n".join("  " + json.dumps(item) for item in value) + "\n ]"
        else:
            text = json.dumps(value)
        fields.append(f" {json.dumps(key)}: {text}")
    return "{\n" + ",\n".join(fields) + "\n}\n"


def load(path: str | os.PathLike) -> SubmissionResult:
    """The record at ``path``, as written (its seal unchecked: reports are views; see :func:`load_record`), its text
    valid (JSON's ``\\udc80`` escapes a surrogate that no report could write)."""
    return SubmissionResult.from_json(texts.valid_tree(json.loads(Path(path).read_text(encoding="utf-8")))[0])


# What makes a record unfit to be the grade of record, in words (the key of each problem is its kind).
FORGED = "not sealed by this grader (edited after grading, or written elsewhere)"
UNISOLATED = "graded without isolation (--sandbox none)"
MISPLACED = "not at the path its student's id gives (a copy, a rename, or a file written beside a record)"


def load_record(path: str | os.PathLike) -> tuple[SubmissionResult | None, str]:
    """``(result, problem)``: the record at ``path`` and why it is not a grade of record (``""`` when it is):
    ``path`` is a link or not the path its student's id gives (:data:`MISPLACED`), its seal (which binds the
    file's name) fails (:data:`FORGED`; None when it is no record at all), or it was graded unisolated
    (:data:`UNISOLATED`). ``--resume``, ``merge`` and ``final-gradebook`` read each record at its own path."""
    path = Path(path)
    if path.is_symlink():  # the judge writes files; a link could borrow any record
        return None, MISPLACED
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        result = SubmissionResult.from_json(data)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None, FORGED
    if path.name != f"{safe_name(result.student)}.json":
        return result, MISPLACED
    if not seals.is_sealed(data, path.name):
        return result, FORGED
    if not result.isolated:
        return result, UNISOLATED
    return result, ""


def refuse_untrusted(problems: dict[str, str] | Iterable[tuple[str, str]], command: str,
                     allow_unisolated: bool = False) -> None:
    """KitError naming the students or files (``{student or file: problem}``, or such pairs) whose records
    ``command`` may not take; ``allow_unisolated`` accepts sealed records of a ``--sandbox none`` run (never a
    broken seal, never a record away from its student's path)."""
    by_kind: dict[str, list[str]] = {}
    for student, problem in (problems.items() if isinstance(problems, dict) else problems):
        if problem and not (allow_unisolated and problem == UNISOLATED):
            by_kind.setdefault(problem, []).append(student)
    if by_kind:
        parts = [f"{problem}: {', '.join(sorted(ascii(student) for student in students))}"
                 for problem, students in sorted(by_kind.items())]
        hint = "; regrade them with grade --resume" + (
            " (--allow-unisolated accepts the records of a --sandbox none run)" if UNISOLATED in by_kind else "") + (
            ", and remove every file of results/ that is not its student's record" if MISPLACED in by_kind else "")
        raise KitError(f"{command} refused records {'; '.join(parts)}{hint}")
