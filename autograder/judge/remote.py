"""The judge's side of a worker: start it, ask it for calls, and turn every way a call can go wrong into an exception.

:class:`RemoteSubmission` is what the hidden tests see as ``student``. Calling
``student.some_function(x, 4)`` sends a request to the sandboxed worker and
returns plain data (tensors built from bytes). Anything that goes wrong becomes
a :class:`SubmissionFailure` subclass, so the judge can tell "the student's
code failed" from "the hidden test's assertion failed".

If a call crashes the worker or runs past its time limit, the worker is
killed and the next call starts a fresh one: only the tests that depend on the
broken call lose points.

Time limits are CPU seconds of the worker's processes, read by the judge from
``/proc`` (:mod:`autograder.sandbox.clocks`); the wall clock is only a backstop
(:data:`BACKSTOP` times a limit) that catches hangs. When it fires, what the
judge saw while waiting decides: a worker that slept or blocked is charged, a
worker that was ready to run but waited for a CPU is the machine's fault
(:class:`MachineBusy`: the student is graded again, never charged).
"""

import contextlib
import functools
import hashlib
import random
import time
from collections.abc import Hashable

from ..sandbox import clocks
from ..records import seal
from ..worker import protocol, text
from . import ahead
from .failures import (BadValue, CallTimeout, ForbiddenCall, ImportFailure, MachineBusy, SandboxFault, StudentError,
                       SubmissionTimeout,
                       WorkerCrash, clean_record, public_type)
from ..worker.contract import Contract

BACKSTOP = 4  # the wall-clock backstop, in multiples of a CPU limit: it catches hangs, it never measures work
FIRST_LOOK = 1.0  # wall seconds before the judge first reads a waiting worker's CPU (short calls: never)
LOOK_EVERY = 0.25  # and then between readings

# ---------------------------------------------------------------- the student's code, as the tests see it

class RemoteObject:
    """An object (a module instance) that lives in the worker."""

    def __init__(self, submission, handle, name, generation):
        self._submission, self._handle, self._name, self._generation = submission, handle, name, generation

    def _ask(self, op, label, **fields):
        return self._send(label, dict(fields, op=op, handle=self._handle.id))

    def _send(self, label, message):
        if self._generation != self._submission.generation:
            raise WorkerCrash(label, "this object was lost when an earlier call restarted the worker")
        return self._submission.request(self._name, label, message)

    def __call__(self, *args, device=None, **kwargs):
        return self._send(f"{self._name}.forward", ahead.forward_message(self._handle.id, args, kwargs, device=device))

    def cpu_of_forward(self, *args, **kwargs):
        """``(value, cpu seconds)``: a forward measured as :meth:`RemoteSubmission.cpu_of_call` measures a call
        (the worker's whole process tree, read by the judge before and after; asked alone, never from a batch)."""
        before = self._submission._worker(self._name).precise_cpu()
        with self._submission.alone():
            value = self(*args, **kwargs)
        return value, max(self._submission._worker(self._name).precise_cpu() - before, 0.0)

    def call_seeded(self, seed, *args, **kwargs):
        """Forward with the worker's random generators seeded with ``seed`` (an int) instead of the usual seed:
        two seeds give two outputs exactly when the forward draws random numbers."""
        return self._send(f"{self._name}.forward", ahead.forward_message(self._handle.id, args, kwargs, seed=int(seed)))

    def attr(self, name):
        return self._send(f"{self._name}.{name}", ahead.attr_message(self._handle.id, name))

    def on_fake_device(self, *args, **kwargs):
        """Forward with the module's parameters and buffers on a fake device; see :func:`fake_result`."""
        return fake_result(self._ask("method", f"{self._name}.forward", method="__call__", args=list(args),
                                     kwargs=kwargs, fake=True))

    def call_with(self, parameters, *args, **kwargs):
        """Forward with some parameters replaced (``{name: tensor}``), the module itself left as it was."""
        return self._ask("method", f"{self._name}.forward", method="__call__", args=list(args), kwargs=kwargs,
                         override=parameters)

    def child(self, name):
        """The submodule ``name`` as an object of its own (to run one layer alone)."""
        value = self._send(f"{self._name}.{name}", ahead.child_message(self._handle.id, name))
        if not isinstance(value, protocol.Handle):
            raise BadValue(f"{self._name}.{name}", "no module")
        return RemoteObject(self._submission, value, self._name, self._generation)

    def tensors(self):
        """``{"parameters": {name: tensor}, "buffers": {name: tensor}}``, every name of each (aliases too)."""
        return self._send(f"{self._name} parameters", ahead.tensors_message(self._handle.id))

    def to(self, target):
        """Move the module to a device (``"meta"``, ``"cuda"``) or convert it to a dtype (``torch.float64``)."""
        if isinstance(target, str):
            self._ask("to", f"{self._name}.to", device=target)
        else:
            self._ask("to", f"{self._name}.to", dtype=protocol.DTYPE_NAMES[target])
        return self

    def grads(self, *args, **kwargs) -> dict:
        """Forward and backward of ``sum(output ** 2)`` in the worker: ``{"output": tensor, "grads": {parameter
        name: tensor or None}}``. A failure names the step that failed: ``<Module>.forward`` when the forward
        raised or returned no tensor, ``<Module>.backward`` when the backward through it raised."""
        try:
            reply = self._send(f"{self._name}.forward and .backward",
                               ahead.grads_message(self._handle.id, args, kwargs))
        except StudentError as error:
            if error.phase is None:
                raise
            # The worker names the step (its word picks one of two fixed ones, about its own code only).
            raise StudentError(f"{self._name}.{error.phase}", error.record) from None
        import torch  # the judge's: imported long before any call

        if isinstance(reply, dict) and reply.get("grads") is None and not isinstance(reply.get("output"),
                                                                                       torch.Tensor):
            raise BadValue(f"{self._name}.forward", "no tensor, so there is no gradient to compute")
        return reply

    def forward_reporting_changes(self, *args, device=None, **kwargs) -> tuple[object, tuple[str, ...]]:
        """``(output, changed)``: the forward as :meth:`__call__` runs it, and the names of the arguments it
        changed in place (see :func:`changes_result`)."""
        label = f"{self._name}.forward"
        reply = self._send(label, ahead.forward_message(self._handle.id, args, kwargs, device=device,
                                                        report_changes=True))
        return changes_result(reply, label, argument_names(args, kwargs))


def fake_result(reply):
    """The value of a fake-device call, each tensor (a meta tensor: it has no values) marked with the
    device it was on in the worker (``device_of``)."""
    if not isinstance(reply, dict) or not isinstance(reply.get("devices"), list):
        raise BadValue("a call on the fake device", "no result")
    import torch  # the judge's: imported long before any call

    devices = iter(reply["devices"])

    def mark(value):
        if isinstance(value, (protocol.Handle, protocol.Unsupported)):
            return value
        if isinstance(value, torch.Tensor):
            value.source_device = str(next(devices, "unknown"))[:20]
        elif isinstance(value, (list, tuple)):
            for item in value:
                mark(item)
        elif isinstance(value, dict):
            for item in value.values():
                mark(item)
        return value

    return mark(reply.get("value"))


def _batch_replies(reply, blobs, count):
    """``[(item's reply, its blobs)]`` of a batch's reply: ``count`` replies, each a dict, and blob counts that add
    up; ProtocolError otherwise."""
    replies, counts = reply.get("batch"), reply.get("blob_counts")
    if (not isinstance(replies, list) or not isinstance(counts, list) or len(replies) != count
            or len(counts) != count or not all(isinstance(item, dict) for item in replies)
            or not all(protocol._is_int(n) and n >= 0 for n in counts) or sum(counts) != len(blobs)):
        raise protocol.ProtocolError("a malformed batch")
    answers, offset = [], 0
    for item, size in zip(replies, counts):
        answers.append((item, blobs[offset : offset + size]))
        offset += size
    return answers


def _no_handle(name, value):
    """``value``, unless the worker answered a function call with an object kept in it (never data)."""
    if isinstance(value, protocol.Handle):
        kind = public_type([value.type], None)
        raise BadValue(name, f"an object of type {kind}" if kind else "an object of a class of its own")
    return value


def argument_names(args, kwargs) -> tuple[str, ...]:
    """How a report of changes names a call's arguments: ``arg0``, ``arg1``... by position, then each keyword by
    its name (the worker's ``session.argument_names``, the same rule)."""
    return tuple(f"arg{index}" for index in range(len(args))) + tuple(kwargs)


def changes_result(reply, label, names) -> tuple[object, tuple[str, ...]]:
    """``(value, changed)`` from a call made with ``report_changes``: the worker answers ``{"value": the result,
    "changed": [argument names]}``. The list is the worker's word, checked as every reply field is: a list of
    distinct names among ``names`` (the arguments the judge sent), else :class:`BadValue`. ``changed`` follows
    the order of ``names``."""
    changed = reply.get("changed") if isinstance(reply, dict) and set(reply) == {"value", "changed"} else None
    if (not isinstance(changed, list) or len(changed) > len(names)
            or not all(isinstance(name, str) and name in names for name in changed)
            or len(set(changed)) != len(changed)):
        raise BadValue(label, "no well-formed report of the arguments it changed")
    return reply["value"], tuple(name for name in names if name in changed)


class RemoteSubmission:
    """One student's submission behind a (restartable) sandboxed worker."""

    def __init__(self, sandbox, launch, contract: Contract, forbidden=None, worker=None, files=None,
                 plans: ahead.Plans | None = None):
        self.sandbox, self.launch = sandbox, launch  # launch() starts a fresh worker over this submission
        self.contract = contract
        self.forbidden = forbidden or {}  # name -> set of APIs found by the static scan
        self.unavailable = {}  # module -> names it imports that the grader does not have (imports.py's scan)
        # Line counts of the student's files: a place the worker names must exist in them.
        self.lines = {module: data.count(b"\n") + 1 for module, data in (files or {}).items()}
        self.digests = {module: hashlib.sha256(data).digest() for module, data in (files or {}).items()}
        self.limits = sandbox.limits
        self.clock = time.monotonic  # the backstop's clock (tests inject one: no assertion waits on the wall)
        self.deadline = self.clock() + BACKSTOP * self.limits.submission_seconds  # a backstop: CPU is the limit
        self.budget = self.limits.submission_seconds  # CPU seconds for the whole submission
        self.cpu_before = 0.0  # CPU seconds of this submission's workers already discarded
        self.samples = clocks.Samples()  # what long waits were made of, over the whole submission
        self.busy = ""  # why the machine could not grade this submission (MachineBusy), once it happened
        self.fault = ""  # why the sandbox could not grade this submission (SandboxFault), once it happened
        self.worker = worker
        self.spare = worker is not None  # started ahead: checked before its first use
        self.generation = 0
        self.broken_modules = {}  # module -> SubmissionFailure, decided once
        self.hung = {}  # name -> (seconds, whether it slept)
        self.crashes = {}  # name -> count
        self.crashed_how = {}  # name -> how its first crash ended the worker (the judge's words)
        self.events = []  # what went wrong, for the result's notes
        self.ahead = None  # the planned calls of the table of cases being checked (calls_ahead)
        self.plans = plans  # the judge's plans, made once for every submission (None: each made here)
        self.check = None  # the hidden test running now (checking), which names its plans
        self.batch_failed = False
        self.stand_ins = {}  # contract name -> the stand-in's source, bound in the worker for now (standing_in)
        self.stood_in = {}  # the hidden test -> the names it used stand-ins for (its result says so)
        self.outputs = []
        self.cuda = None

    # ------------------------------------------------------------ lifecycle

    def _worker(self, label):
        if self.busy:  # the student is graded again: nothing more is started for this try
            raise MachineBusy(self.busy)
        if self.fault:  # the sandbox lost this student's files: nothing more is tried, a human looks
            raise SandboxFault(self.fault)
        if self.spare:
            self._check_spare()
        if self.worker is None:
            if self.clock() >= self.deadline:  # a worker started now could not even say hello in time
                raise self._backstop_passed()
            try:
                self.worker = self.launch()
            except (OSError, protocol.ProtocolError) as error:
                self.events.append(f"no worker could be started: {error}")
                raise WorkerCrash(label, "the grading process could not be started") from None
            self.generation += 1
        deadline = min(self.deadline, time.monotonic() + BACKSTOP * self.limits.start_seconds)
        try:
            hello = self.worker.ready(deadline)
        except protocol.ChannelTimeout:  # no student code runs before the hello: the machine's trouble
            self._discard("the worker did not start in time")
            raise self._machine_busy("a worker did not start within the backstop") from None
        except protocol.ProtocolError:
            detail = self.worker.exit_detail()
            self._discard(f"the worker failed to start ({detail})")
            raise WorkerCrash(label, f"the grading process failed to start: {detail}") from None
        self.cuda = hello.get("cuda") is True
        return self.worker

    def _check_spare(self):
        """A worker started ahead may have died before it served this student (with its zygote, say): no fault
        of the student's, so it is replaced before the first request rather than counted as a crash."""
        self.spare = False
        try:
            self.worker.ready(min(self.deadline, time.monotonic() + self.limits.start_seconds))
        except protocol.ProtocolError as error:
            self.worker.close()
            self.worker = None
            self.events.append(f"a worker started ahead was lost before its first request ({error}); "
                               "started another")

    def _discard(self, why, worker=None, count=True):
        """End ``worker`` (the current one by default), keeping its output and counting the CPU it used (towards
        the submission's limit; ``count=False`` when no call follows, sparing a scan of ``/proc``)."""
        worker = self.worker if worker is None else worker
        if worker is not None and not getattr(worker, "discarded", False):
            worker.discarded = True
            self.outputs.append(worker.output)
            if count:
                with contextlib.suppress(OSError):  # its last reading, if it has already ended
                    reading = worker.usage()
                    self.cpu_before += max(0.0, max(reading.cpu if reading.alive else 0.0, worker.last_cpu)
                                           - worker.cpu_start)
            worker.close()
        if worker is not None and worker is self.worker:
            self.worker = None
        if why:
            self.events.append(why)

    def _backstop_passed(self):
        """The failure to raise when the whole submission's wall-clock backstop has passed between calls: the
        machine's, if its long waits were mostly for a CPU, else the submission's (it slept)."""
        if self.samples.mostly_starved:
            return self._machine_busy("the submission's wall-clock backstop passed while it waited for a CPU")
        return SubmissionTimeout(self.budget, asleep=True)

    def _machine_busy(self, why):
        """Record that the machine, not the submission, kept this student from being graded."""
        self.busy = self.busy or why
        self.events.append(f"the machine was too busy: {why}; not graded this time")
        return MachineBusy(self.busy)

    def cpu_spent(self, worker=None, mark=None):
        """CPU seconds this submission has used so far, over all its workers (as the judge reads them)."""
        worker = self.worker if worker is None else worker
        if worker is None:
            return self.cpu_before
        mark = worker.cpu_mark() if mark is None else mark
        return self.cpu_before + max(0.0, mark - worker.cpu_start)

    def close(self):
        """The submission is graded: end its worker (no call follows, so its CPU is not read again)."""
        self._discard(None, count=False)

    def output_text(self):
        texts = [out.text() for out in self.outputs + ([self.worker.output] if self.worker else [])]
        return "\n".join(text for text in texts if text)

    def cuda_available(self):
        if self.cuda is None:
            self._worker("start")
        return self.cuda

    # ------------------------------------------------------------ requests

    def _ensure_module(self, module, label):
        """The worker, with ``module`` imported in it (imported now when it was not yet)."""
        if module in self.broken_modules:
            raise self.broken_modules[module]
        worker = self._worker(label)
        if module in worker.imported:
            return worker
        try:
            self._exchange(worker, {"op": "import", "module": module}, f"importing {module}.py")
        except (WorkerCrash, CallTimeout) as failure:  # the import itself crashed or hung
            self.broken_modules[module] = failure
            raise
        worker.imported.add(module)
        return worker

    def ask(self, message, label, seconds=None):
        """Send one request that is not a call of a contract name (a notebook's cell, its names); return the
        decoded value or raise the matching SubmissionFailure. ``seconds`` replaces the per-call time limit."""
        return self._exchange(self._worker(label), message, label, seconds)

    def _exchange(self, worker, message, label, seconds=None, blobs=None):
        """Send one request; return the decoded value or raise the matching SubmissionFailure (or MachineBusy).
        ``seconds`` replaces the per-call CPU limit (a notebook cell has its own); ``blobs``: the message is
        encoded already (:func:`ahead.encoded`), these are its blobs."""
        if blobs is None:
            message, blobs = ahead.encoded(message)
        reply, reply_blobs = self._round_trip(worker, message, blobs, label, seconds)
        return self._answer(worker, message, label, reply, lambda: protocol.decode(reply.get("value"), reply_blobs))

    def _round_trip(self, worker, message, blobs, label, seconds=None, cpu_seconds=None):
        """Send an encoded request and wait for its reply under the call's limits; ``(reply, reply blobs)``. A worker
        that hangs, crashes or sends a malformed frame is ended here (CallTimeout, WorkerCrash). ``cpu_seconds``:
        a lower CPU limit than the call's (a batch's), its wall-clock backstop left as the call's."""
        if self.busy:
            raise MachineBusy(self.busy)
        limit = seconds or self.limits.call_seconds
        began, mark = self.clock(), worker.cpu_mark()  # one pread: the call's CPU starts here
        left = self.budget - self.cpu_spent(worker, mark)
        if left <= 0:
            raise SubmissionTimeout(self.budget)
        if began >= self.deadline:  # the whole submission's backstop, passed between calls
            raise self._backstop_passed()
        backstop = min(began + BACKSTOP * limit, self.deadline)
        try:
            nonce = worker.send(message, blobs, backstop)
            self._await(worker, label, limit, min(cpu_seconds or limit, limit, left), mark, began, backstop)
            reply, reply_blobs = worker.receive(nonce, backstop, self.limits.reply_bytes)
        except protocol.ChannelTimeout:  # it stopped reading its request, or stopped half-way through a reply
            self._discard(f"{label} stopped reading or writing past its time limit; the worker was restarted", worker)
            raise CallTimeout(label, limit, asleep=True) from None
        except (protocol.ProtocolError, OSError) as error:
            # Whatever the worker sent or did, it is the submission's doing: its tests fail as after a crash.
            detail = worker.exit_detail() if isinstance(error, protocol.ChannelClosed) else "it sent a malformed reply"
            self._discard(f"{label} stopped the worker ({detail}); the worker was restarted", worker)
            raise WorkerCrash(label, detail) from None
        if reply.pop(protocol.REPLACED_TEXT, False) and text.NOTE not in self.events:  # said once per submission
            self.events.append(text.NOTE)
        return reply, reply_blobs

    def _answer(self, worker, message, label, reply, decode):
        """The value of ``reply`` (``decode()`` reads it), or the SubmissionFailure it reports."""
        forbidden = reply.get("forbidden")
        if forbidden:
            known = set(self.contract.forbidden)
            apis = [api for api in forbidden if isinstance(api, str) and api in known] if isinstance(
                forbidden, list) else []
            raise ForbiddenCall(label, apis[:5] or sorted(known)[:1])
        if "error" in reply:
            record = clean_record(reply["error"], self.lines, self.contract.modules)
            if record["type"] == "ImportFailed":
                modules = self.contract.modules
                module = record["module"] if record["module"] in modules else message.get("module")
                if module not in modules:
                    module = self.contract.names.get(message.get("name"), modules[0])
                if (record["cause"] or record["type"]) == "MissingFile" and record["mro"] == ["MissingFile"] \
                        and module in self.lines:  # the worker's own record: a student's class has a longer mro
                    # Intake read this file and sent it: a worker that cannot find it lost it (its staged copy
                    # unreadable to it, say), which no submission can cause and no student is charged for.
                    self.fault = self.fault or f"{module}.py was handed in and read, but its worker did not find it"
                    self.events.append(f"sandbox problem: {self.fault}; not graded")
                    raise SandboxFault(self.fault)
                failure = ImportFailure(module, record, label, self.contract.names, self.unavailable.get(module, ()),
                                        self.contract.packages)
                self.broken_modules[module] = failure
                raise failure
            raise StudentError(label, record, fake=message.get("fake") is True)
        try:
            return decode()
        except Exception:  # noqa: BLE001 - any malformed value is the submission's fault, never the grader's
            self._discard(f"{label}: the worker sent a malformed reply; the worker was restarted", worker)
            raise WorkerCrash(label, "it sent a malformed reply") from None

    def _await(self, worker, label, limit, cpu_limit, mark, began, backstop):
        """Wait until ``worker`` begins to reply. A reply within :data:`FIRST_LOOK` costs no reading; after that
        the judge reads the worker's tree every :data:`LOOK_EVERY` s and ends the call when its CPU reaches
        ``cpu_limit`` (charged), when it has mostly slept for ``limit`` wall seconds (charged), or at the
        ``backstop``: charged if it slept, the machine's fault (MachineBusy) if it was ready to run and waited
        for a CPU."""
        look = began + FIRST_LOOK
        if worker.replied(min(look, backstop) - self.clock()):
            return  # the common case: no reading, nothing kept
        call, last = clocks.Samples(), None
        try:
            while not worker.replied(min(look, backstop) - self.clock()):
                now, reading = self.clock(), worker.usage()
                if last is None:  # no run-queue figure at the call's start: the moment's state stands for it
                    call.add(now - began, reading.cpu - mark, 0.0, reading.runnable)
                else:
                    call.add(now - last[0], reading.cpu - last[1].cpu, reading.waited - last[1].waited,
                             reading.runnable)
                last = (now, reading)
                if not reading.alive:
                    return  # it ended: the read that follows says how
                if reading.cpu - mark >= cpu_limit:
                    self._discard(f"{label} ran past its CPU time limit; the worker was restarted", worker)
                    if cpu_limit < limit:
                        raise SubmissionTimeout(self.budget)
                    raise CallTimeout(label, limit)
                if now >= backstop or (now - began >= limit and call.mostly_asleep):
                    self._discard(f"{label} waited past its time limit; the worker was restarted", worker)
                    if call.mostly_starved:
                        raise self._machine_busy(f"{label} waited {now - began:.0f} s for a CPU and used "
                                                 f"{reading.cpu - mark:.1f} s of it")
                    if backstop >= self.deadline and now >= backstop:
                        raise SubmissionTimeout(self.budget, asleep=True)
                    raise CallTimeout(label, limit, asleep=True)
                look = now + LOOK_EVERY
        finally:
            self.samples.merge(call)

    def request(self, name, label, message):
        """Run ``message`` for the contract name ``name``; ``label`` names the call in feedback."""
        if name in self.hung:
            seconds, asleep = self.hung[name]
            raise CallTimeout(label, seconds, earlier=True, asleep=asleep)
        if self.crashes.get(name, 0) >= 2:
            how = self.crashed_how.get(name)
            raise WorkerCrash(label, "it crashed the worker twice before" + (f", the first time: {how}" if how else "")
                              + "; not tried again")
        static = self.forbidden.get(name)
        if static:
            raise ForbiddenCall(label, static)
        worker = self._ensure_module(self.contract.names[name], label)
        worker = self._bind_stand_ins(worker, label)
        try:
            blobs = None
            if self.ahead is not None:
                message, blobs = ahead.encoded(message)
                kept = self._planned_reply(worker, ahead.key_of(message, blobs), label)
                if kept is not None:
                    return self._answer(worker, message, label, *kept)
                worker = self._ensure_module(self.contract.names[name], label)  # a failed batch may have cost it
            return self._exchange(worker, message, label, blobs=blobs)
        except CallTimeout as timeout:
            self.hung[name] = (self.limits.call_seconds, timeout.asleep)
            raise
        except WorkerCrash as crash:
            self.crashes[name] = self.crashes.get(name, 0) + 1
            self.crashed_how.setdefault(name, crash.detail_words)
            raise

    @contextlib.contextmanager
    def alone(self):
        """Within the block, every call is asked alone: none takes a reply the worker gave ahead (a check's gate
        makes calls of its own, which must not take the answers its check's planned calls got)."""
        planned, self.ahead = self.ahead, None
        try:
            yield
        finally:
            self.ahead = planned

    @contextlib.contextmanager
    def standing_in(self, sources: dict[str, str]):
        """Within the block, the worker runs ``sources``' stand-ins (contract name -> source text defining it, the
        lesson's own recipe) wherever the submission uses its own objects of those names, so the code built on a
        broken part is graded with a part that works (the worker binds them: :mod:`autograder.worker.part_stand_ins`).
        Every call is asked alone (no reply a batch got without them is taken); the hidden test running
        (:meth:`checking`) is recorded as graded with them; after the block the student's own objects are back."""
        if self.check is not None:
            self.stood_in.setdefault(self.check, set()).update(sources)
        planned, before, self.ahead, self.stand_ins = self.ahead, self.stand_ins, None, dict(sources)
        try:
            yield
        finally:
            self.ahead, self.stand_ins = planned, before

    def _bind_stand_ins(self, worker, label):
        """``worker`` with the stand-ins of now bound (sent when they differ from what it has bound)."""
        bound = getattr(worker, "stand_ins", {})
        if bound == self.stand_ins:
            return worker
        for name in self.stand_ins:  # the files whose names they replace, imported
            self._ensure_module(self.contract.names[name], label)
        worker = self._worker(label)
        self._exchange(worker, {"op": "stand_in", "sources": self.stand_ins}, label)
        worker.stand_ins = dict(self.stand_ins)
        return worker

    @contextlib.contextmanager
    def checking(self, test: Hashable):
        """Within the block, the hidden test named ``test`` runs (the same name for the same test and arguments):
        the plans it names are the judge's to keep."""
        self.check = test
        try:
            yield
        finally:
            self.check = None

    @contextlib.contextmanager
    def calls_ahead(self, cases, key=None):
        """Within the block, the calls ``cases`` make (each called with a stand-in for this submission, see
        :mod:`.ahead`) go to the worker in one batch when the first of them is made; outside it, nothing is kept.
        ``key`` names these cases within the hidden test running (:meth:`checking`): the same name, the same
        calls, whatever the submission, so the judge plans them once (unnamed, they are planned here)."""
        if self.ahead is not None or self.batch_failed:  # a plan is running, or a batch failed: one at a time
            yield ahead.no_turns
            return

        def make():
            try:
                return ahead.Plan.of(ahead.plan_calls(self.contract, cases))
            except Exception:  # noqa: BLE001 - a plan that cannot be made (an argument that does not encode): none
                return None

        named = self.plans is not None and self.check is not None and key is not None
        plan = self.plans.made((self.check, key), make) if named else make()
        self.ahead = ahead.Ahead(plan) if plan is not None and len(plan.planned) > 1 else None
        try:
            yield self.ahead.turn if self.ahead is not None else ahead.no_turns
        finally:
            self.ahead = None

    def _planned_reply(self, worker, key, label):
        """``(reply, decode)`` for the request with ``key`` from the planned batch: a reply kept from it, or the
        batch itself, sent when this is its first call. None: no planned reply (it is asked alone)."""
        if self.ahead.generation not in (None, self.generation):  # kept from a worker since lost: never reused
            self.ahead.replies.clear()
        kept = self.ahead.take(key)
        if kept is None and key == self.ahead.first and self.ahead.planned:
            kept = self._send_ahead(worker, label)
        return kept

    def _send_ahead(self, worker, label):
        """Send the planned calls that may go now (up to the first whose name hung, crashed twice, is forbidden
        or whose file is not imported yet) in one batch and keep their replies; return the first one's. A batch
        that fails as a whole is forgiven (up to ``BATCH_SECONDS`` of its CPU, and its events): None, and its
        calls are then made one at a time (the worker, if lost, started again), as are later tables'."""
        planned, self.ahead.planned = self.ahead.planned, []
        items = []
        for name, message, blobs in planned:
            if (name in self.hung or self.crashes.get(name, 0) >= 2 or self.forbidden.get(name)
                    or self.contract.names[name] not in worker.imported):
                break
            items.append((message, blobs))
        # Only with room to spare: a batch never meets the submission's CPU budget or its wall-clock backstop (and a
        # worker started after it still has time to start), so a timeout of the batch is always its own.
        spent, events = self.cpu_spent(worker), len(self.events)
        room = BACKSTOP * (self.limits.call_seconds + self.limits.start_seconds)
        if len(items) < 2 or self.budget - spent < 2 * ahead.BATCH_SECONDS or self.deadline - self.clock() < room:
            return None
        batch = {"op": "batch", "items": [message for message, _ in items],
                 "blob_counts": [len(blobs) for _, blobs in items]}
        try:
            reply, reply_blobs = self._round_trip(worker, batch, [blob for _, blobs in items for blob in blobs],
                                                  f"{label} (with the calls of its table)",
                                                  cpu_seconds=ahead.BATCH_SECONDS)
            answers = _batch_replies(reply, reply_blobs, len(items))
        except (CallTimeout, WorkerCrash, SubmissionTimeout, protocol.ProtocolError):
            if worker is self.worker:  # a malformed batch: the worker goes, as after any malformed reply
                self._discard(None, worker)
            # Forgiven up to BATCH_SECONDS of CPU (a worker that ran on past its limit pays for the rest), and
            # said nowhere: the calls are made again one at a time, and the submission's later tables too.
            self.cpu_before -= min(max(self.cpu_before - spent, 0.0), ahead.BATCH_SECONDS)
            self.events[events:] = []
            self.batch_failed = True
            return None
        self.ahead.generation, made, first = self.generation, {}, None
        for index, ((message, blobs), (item, item_blobs)) in enumerate(zip(items, answers)):
            value = item.get("value")
            if isinstance(value, dict) and protocol._is_int(value.get("__handle__")):
                made[index] = value["__handle__"]
            answer = (item, functools.partial(protocol.decode, value, item_blobs))
            key = self.ahead.keys[index] or ahead.with_handle(message, blobs, made)
            if index == 0:
                first = answer
            elif key is not None:
                self.ahead.keep(key, answer, self.ahead.cases[index])
        return first

    def draw(self, label: str) -> random.Random:
        """A generator for a check's arguments, seeded by this submission's files and ``label`` under the judge's
        secret (:func:`seal.secret_seed`): the same submission always gets the same draw, and no submission can
        know its draw in advance (so no cache prepared ahead can answer it)."""
        digest = hashlib.sha256()
        for module in sorted(self.digests):
            digest.update(module.encode() + b"\0" + self.digests[module])
        return random.Random(seal.secret_seed(digest.digest() + b"\0" + label.encode()))

    def cpu_of_call(self, name, *args, **kwargs):
        """``(value, cpu seconds)``: ``name(*args, **kwargs)`` called as usual, and the CPU time the worker's whole
        process tree used meanwhile (threads, children, reaped or not), read by the judge before and after, to the
        nanosecond (:func:`clocks.precise_cpu`; never the worker's word). Work done aside during the call is
        counted; work done before it cannot help a check whose arguments come from :meth:`draw`."""
        self._ensure_module(self.contract.names[name], name)  # the import is not the call's work
        worker = self._worker(name)
        before = worker.precise_cpu()
        with self.alone():  # measured: asked alone, never answered from a batch
            value = self.call(name, *args, **kwargs)
        worker = self._worker(name)
        return value, max(worker.precise_cpu() - before, 0.0)

    def call(self, name, *args, device=None, **kwargs):
        return _no_handle(name, self.request(name, name, ahead.call_message(name, args, kwargs, device)))

    def call_reporting_changes(self, name: str, *args, device=None, **kwargs) -> tuple[object, tuple[str, ...]]:
        """``(value, changed)``: ``name(*args, **kwargs)`` called as :meth:`call` does, and the names of the
        arguments the call changed in place (``arg0``, ``arg1``... by position, keywords by name; empty when it
        left every input as it was). The worker copies the arguments only for such a call."""
        reply = self.request(name, name, dict(ahead.call_message(name, args, kwargs, device), report_changes=True))
        value, changed = changes_result(reply, name, argument_names(args, kwargs))
        return _no_handle(name, value), changed

    def new(self, name, *args, device=None, **kwargs):
        value = self.request(name, name, ahead.new_message(name, args, kwargs, device))
        if not isinstance(value, protocol.Handle):
            raise BadValue(name, "no object")
        return RemoteObject(self, value, name, self.generation)

    def on_fake_device(self, name, *args, **kwargs):
        """``name(*args)`` run on a fake device (meta tensors in, see :func:`fake_result`)."""
        return fake_result(self.request(name, name, {"op": "call", "name": name, "args": list(args),
                                                     "kwargs": kwargs, "fake": True}))

    def __getattr__(self, name):
        contract = self.__dict__.get("contract")  # looked up without __getattr__: never a recursion
        if contract is None or name not in contract.names:
            raise AttributeError(name)
        if name in contract.classes:
            return lambda *args, **kwargs: self.new(name, *args, **kwargs)
        return lambda *args, **kwargs: self.call(name, *args, **kwargs)
