"""Every way a student's call can fail, as an exception (:class:`SubmissionFailure` and its kinds), each with
its ``summary`` in the judge's words (student-visible), its ``detail`` in the submission's (instructor only) and
its typed ``cause``; and what a worker says about an error, checked and bounded before use (:func:`clean_record`).
"""

import builtins
import re

from ..records.results import Cause
from ..worker.text import valid_text

# What the judge keeps of a student's text (exception messages, type names): enough for the instructor.
TEXT_LIMIT = 400
NAME_LIMIT = 100
# Type names that may appear in student-visible feedback: Python's own (a class the submission defines may carry
# any text in its name, hidden inputs included).
PUBLIC_TYPES = frozenset(name for name, value in vars(builtins).items() if isinstance(value, type)) | {
    "Tensor", "Parameter", "NoneType", "function", "module", "MissingFile", "MissingName"}
_WHERE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]{0,99})\.py:(\d{1,6})$")
PHASES = ("forward", "backward")  # the steps of a gradient request a worker's error may name


def bounded(text, limit):
    """``text`` as valid text (:func:`~autograder.worker.text.valid_text`: every text the judge keeps passes
    here) cut to ``limit`` characters, saying so."""
    text = valid_text(text)
    return text if len(text) <= limit else text[: max(limit - 10, 0)] + " [... cut]"


def _text(value, limit=TEXT_LIMIT):
    """A string the worker sent, as a bounded, valid ``str`` (anything else becomes empty)."""
    return bounded(value, limit) if isinstance(value, str) else ""


def public_type(mro, fallback="an exception of a class of its own"):
    """The most specific of Python's own type names in ``mro`` (a list of names the worker sent), or
    ``fallback``."""
    for name in mro:
        if name in PUBLIC_TYPES:
            return name
    return fallback


def clean_record(record, lines, modules):
    """A worker's error record with every field checked and bounded; ``where`` is kept only when it names one
    of ``modules`` (the contract's student files) and, with ``lines`` (module -> line count), a line that
    exists. ``phase`` is one of :data:`PHASES` or empty; ``on_cpu_too`` and ``mixed_devices`` are booleans."""
    record = record if isinstance(record, dict) else {}
    mro = record.get("mro")
    mro = [_text(item, NAME_LIMIT) for item in mro[:20]] if isinstance(mro, list) else []
    kind = _text(record.get("type"), NAME_LIMIT) or "Exception"
    where = _text(record.get("where"), 200)
    match = _WHERE.match(where)
    if not match or match.group(1) not in modules or (
            lines is not None and not 1 <= int(match.group(2)) <= lines.get(match.group(1), 0)):
        where = None
    return {"type": kind, "mro": mro or [kind], "message": _text(record.get("message")), "where": where,
            "cause": _text(record.get("cause"), NAME_LIMIT), "module": _text(record.get("module"), NAME_LIMIT),
            "missing": _text(record.get("missing"), NAME_LIMIT),
            "phase": record.get("phase") if record.get("phase") in PHASES else "",
            "on_cpu_too": record.get("on_cpu_too") is True, "mixed_devices": record.get("mixed_devices") is True}


class SubmissionFailure(Exception):
    """The student's code did not produce an answer; ``summary`` is safe to show to the student (the judge's
    words, type names of Python's own and places in the student's files: never text the submission chose, which
    could echo hidden inputs); ``detail`` is the submission's own text, for the instructor only."""

    summary = "your code did not produce an answer"
    detail = ""
    cause = Cause("crashed")  # what went wrong, as a value (each kind below sets its own)

    def __str__(self):
        return self.summary


class StudentError(SubmissionFailure):
    """The student's code raised an exception (known to the judge by names and text only).

    ``phase``: the step of a gradient request that raised ("forward", "backward"; None elsewhere).
    ``on_fake_device``: the call ran on the fake device (the judge asked for it); then ``on_cpu_too`` says the
    same call raised on the CPU as well, and the type, place and message are the CPU run's (what the student
    sees on their own machine), else they are the fake run's, where ``mixed_devices`` marks the device rules'
    own refusal (tensors on two devices, a ``RuntimeError`` on a GPU).
    """

    def __init__(self, name: str, record: dict, fake: bool = False) -> None:
        super().__init__()
        self.name, self.type, self.mro = name, record["type"], record["mro"]
        self.message, self.where = record["message"], record["where"]
        self.record = record
        self.phase = record.get("phase") or None
        self.on_fake_device = fake
        self.on_cpu_too = fake and record.get("on_cpu_too") is True
        self.mixed_devices = fake and not self.on_cpu_too and record.get("mixed_devices") is True
        place = f" at {self.where}" if self.where else ""
        self.cause = Cause("raised", public_type(self.mro, ""), self.where or "")
        self.summary = f"{name} raised {public_type(self.mro)}{place}"
        if self.on_cpu_too:
            self.summary += " on the CPU too (not a device problem)"
        elif self.mixed_devices:
            self.summary += " under the GPU's device rules, mixing tensors of two devices (it runs on the CPU)"
        elif fake:
            self.summary += " under the GPU's device rules (it runs on the CPU)"
        self.detail = f"{self.type}: {self.message}"

    def is_a(self, type_name):
        return type_name in self.mro


class ImportFailure(SubmissionFailure):
    def __init__(self, module, record, label="", names=(), unavailable=(), packages=()):
        super().__init__()
        self.module = module
        cause, where = record["cause"] or record["type"], record["where"]
        missing = label.split(".")[0] if label.split(".")[0] in names else "a name the tests need"
        # A module the judge's own scan found imported and not allowed: named from the scan (the submission's
        # source), never from the worker's words, which only pick which one.
        absent = record.get("missing", "").partition(".")[0]
        absent = absent if absent in unavailable else next(iter(unavailable), "")
        self.cause = Cause("missing_file" if cause == "MissingFile" else "missing_name" if cause == "MissingName"
                           else "import_failed", "" if cause in ("MissingFile", "MissingName")
                           else public_type([cause, *record["mro"]], ""), where or "")
        if cause == "ModuleNotFoundError" and absent:
            self.summary = (f"importing {module}.py failed: it imports `{absent}`, which graders do not have "
                            f"(allowed: {', '.join(packages)})")
            self.detail = f"{cause}: {record['message']}"
        elif cause == "MissingFile":
            self.summary = f"{module}.py is missing from the submission"
        elif cause == "MissingName":
            self.summary = f"{module}.py does not define {missing}"
        else:
            place = f" ({where})" if where else ""
            self.summary = f"{module}.py could not be imported: {public_type([cause, *record['mro']])}{place}"
            self.detail = f"{cause}: {record['message']}"


class WorkerCrash(SubmissionFailure):
    def __init__(self, name, detail):
        super().__init__()
        self.detail_words = detail  # the judge's words for how it stopped (an exit code, a signal)
        self.summary = f"the process running your code stopped during {name} ({detail})"


class CallTimeout(SubmissionFailure):
    """A call that used up its CPU time (``asleep=False``) or waited without computing past its limit."""

    cause = Cause("timeout")

    def __init__(self, name, seconds, earlier=False, asleep=False):
        super().__init__()
        self.asleep = asleep
        when = "earlier " if earlier else ""
        if asleep:
            self.summary = (f"{name} waited without computing (a sleep or a blocking call) for more than {seconds:g} s "
                            f"({when}time limit per call)")
        else:
            self.summary = f"{name} used more than {seconds:g} s of CPU time ({when}time limit per call)"


class SubmissionTimeout(SubmissionFailure):
    cause = Cause("timeout")

    def __init__(self, seconds, asleep=False):
        super().__init__()
        if asleep:
            self.summary = (f"the whole submission waited without computing (sleeps or blocking calls) past its "
                            f"time limit ({seconds:g} s of CPU time)")
        else:
            self.summary = f"the CPU time limit for the whole submission ({seconds:g} s) was used up"


class MachineBusy(Exception):
    """The grading machine was too busy to run this submission: its worker was ready to run and waited for a CPU
    until the wall-clock backstop. Not a :class:`SubmissionFailure`: no test is charged for it; the judge
    records the student as not graded (``machine_busy``) and the run grades them again on a fresh worker."""


class SandboxFault(Exception):
    """The sandbox, not the submission, failed it: a file intake read and sent was missing in its worker (a worker
    that could not read its own staged copy). Not a :class:`SubmissionFailure`: no test is charged; the judge
    records the student as not graded (``sandbox_fault``), for a human to look at and ``--resume`` to regrade."""


class ForbiddenCall(SubmissionFailure):
    def __init__(self, name, apis):
        super().__init__()
        self.apis = sorted(apis)
        self.cause = Cause("forbidden", apis=tuple(self.apis))
        self.summary = f"{name} uses {', '.join(self.apis)}: this part asks you to build it yourself"


class BadValue(SubmissionFailure):
    cause = Cause("bad_value")

    def __init__(self, name, what):
        super().__init__()
        self.summary = f"{name} returned {what}"
