"""Calls sent ahead: the calls a check makes before it reads an answer, planned before it runs and sent to the
worker at once.

A check makes its calls with arguments of its own (a table of cases: taken from each case alone) and reads the
answers after. Run first with a :class:`Planner` in place of the student, the check (each case of a table)
records the calls it makes before it reads an answer: the answers are :class:`Pending` (no tensor), so the check
stops at the first one it reads. When the check then runs for real, its first call sends every planned call in
one batch (one turn between judge and worker instead of one a call), and each later call whose message is byte
for byte a planned one takes that one's reply. A reply is read exactly as if it had come alone, with the same
checks and the same failures; a batch that fails as a whole (a crash, a hang, a malformed reply, more than
:data:`BATCH_SECONDS` of CPU) is forgiven and its calls are made one at a time, as without a plan, and so are
the submission's later checks.

What changes is when the worker runs a call: the planned calls of later cases run before the checks of earlier
ones read their answers, and a call after a failing one has been made (unread; what it prints is in the
student's output). Every request starts from the same seed, so only a submission whose answers depend on the
order of its calls can tell.

A plan is the judge's own: the planner offers a check nothing of the submission's (no answer, no draw, no file),
so the calls it records depend only on the check and its arguments, which are the judge's. A judge therefore
makes each named plan once (:class:`Plans`, its first submission) and every later submission's check sends the
same batch without planning it again.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass

from ..worker import protocol
from ..worker.contract import Contract

MAX_AHEAD = 32  # calls in one batch (the worker takes up to 64)
MAX_PLANS = 4096  # plans a judge keeps (a suite names one or two a check; more are made afresh each time)
# A batch's CPU limit. A table's cases are small (milliseconds of honest work in all); a batch that needs more is
# forgiven and its calls made one at a time. It also bounds what the calls of cases after a failing one (made
# ahead, never read) add to the submission's CPU budget: at most this, once per table.
BATCH_SECONDS = 1.0


# ---------------------------------------------------------------- the messages of calls (the remote's and the plan's)

def call_message(name: str, args, kwargs, device=None) -> dict:
    return {"op": "call", "name": name, "args": list(args), "kwargs": kwargs, "device": device}


def new_message(name: str, args, kwargs, device=None) -> dict:
    return {"op": "new", "name": name, "args": list(args), "kwargs": kwargs, "device": device}


def forward_message(handle, args, kwargs, **fields) -> dict:
    """A module's forward (``fields``: ``device``, ``seed``, ...)."""
    return dict(fields, op="method", handle=handle, method="__call__", args=list(args), kwargs=kwargs)


def tensors_message(handle) -> dict:
    return {"op": "tensors", "handle": handle}


def attr_message(handle, name) -> dict:
    return {"op": "attr", "handle": handle, "name": name}


def child_message(handle, name) -> dict:
    return {"op": "child", "handle": handle, "name": name}


def grads_message(handle, args, kwargs) -> dict:
    """A module's forward and the backward of ``sum(output ** 2)``."""
    return {"op": "grads", "handle": handle, "args": list(args), "kwargs": kwargs}


def encoded(message: dict) -> tuple[dict, list]:
    """``(message with its values encoded, their blobs)``."""
    blobs = []
    message = dict(message)
    for key in ("args", "kwargs", "override"):
        if key in message:
            message[key] = protocol.encode(message[key], blobs)
    return message, blobs


def key_of(message: dict, blobs: list) -> tuple:
    """What two encoded messages share exactly when they ask the same thing (their values, bytes and all): the
    message's ``repr`` (exact for a tree of JSON's builtins, in a third of ``json.dumps``'s time; two messages
    built in another key order differ, so a call is made alone, never answered wrongly) and its blobs."""
    return (repr(message), *map(bytes, blobs))


# ---------------------------------------------------------------- planning

class Unplanned(Exception):
    """The plan stops here: a request the planner does not make ahead (or an answer read)."""


class Pending:
    """An answer not known while planning. Not a tensor: the check reading it fails, and its plan ends there."""

    __slots__ = ()

    def __getattr__(self, name):
        raise Unplanned(name)


class Planner:
    """Stands in for the student while a case is planned: records the calls of contract names (functions and
    constructors, a call reporting the arguments it changed too), a constructed module's forward (reporting
    changes or not), its tensors, gradients, attributes and layers, and answers each with a :class:`Pending`.
    Anything else (a draw, a measured call, the fake device) ends the plan."""

    planning = True  # a lesson helper that would try other calls after a failure (a gate) stops instead

    def __init__(self, contract: Contract) -> None:
        self._contract = contract
        self.calls: list[tuple[str, dict]] = []  # (contract name, message), in order

    def record(self, name: str, message: dict, answer: object) -> object:
        if len(self.calls) >= MAX_AHEAD:
            raise Unplanned("enough")
        self.calls.append((name, message))
        return answer

    def call_reporting_changes(self, name, *args, device=None, **kwargs):
        if name not in self._contract.names:
            raise Unplanned(name)
        return self.record(name, dict(call_message(name, args, kwargs, device), report_changes=True), Pending())

    def __getattr__(self, name):
        contract = self.__dict__.get("_contract")
        if contract is None or name not in contract.names:
            raise Unplanned(name)
        if name in contract.classes:
            return lambda *args, device=None, **kwargs: self.record(
                name, new_message(name, args, kwargs, device), PendingModule(self, name, len(self.calls)))
        return lambda *args, device=None, **kwargs: self.record(name, call_message(name, args, kwargs, device),
                                                                Pending())


class PendingModule:
    """A module the plan constructs (or one of its layers): its forward, its tensors, its gradients, its
    attributes and its layers are planned on it (the batch names it by the index of the call that made it)."""

    def __init__(self, planner: Planner, name: str, index: int) -> None:
        self._planner, self._name, self._made_by = planner, name, {"__item__": index}

    def __call__(self, *args, device=None, **kwargs):
        return self._planner.record(self._name, forward_message(self._made_by, args, kwargs, device=device), Pending())

    def call_seeded(self, seed, *args, **kwargs):
        return self._planner.record(self._name, forward_message(self._made_by, args, kwargs, seed=int(seed)),
                                    Pending())

    def forward_reporting_changes(self, *args, device=None, **kwargs):
        return self._planner.record(self._name, forward_message(self._made_by, args, kwargs, device=device,
                                                                report_changes=True), Pending())

    def tensors(self):
        return self._planner.record(self._name, tensors_message(self._made_by), Pending())

    def grads(self, *args, **kwargs):
        return self._planner.record(self._name, grads_message(self._made_by, args, kwargs), Pending())

    def attr(self, name):
        return self._planner.record(self._name, attr_message(self._made_by, name), Pending())

    def child(self, name):
        return self._planner.record(self._name, child_message(self._made_by, name),
                                    PendingModule(self._planner, self._name, len(self._planner.calls)))

    def __getattr__(self, name):
        raise Unplanned(name)


def plan_calls(contract: Contract, cases: Iterable[Callable[[object], object]]) -> list[tuple[int, str, dict]]:
    """The calls ``cases`` make (each called with a :class:`Planner`) before each reads an answer, in order, at
    most :data:`MAX_AHEAD`: ``[(case index, contract name, message)]``."""
    calls = []
    for index, case in enumerate(cases):
        planner = Planner(contract)
        try:
            case(planner)
        except KeyboardInterrupt:
            raise
        except BaseException:  # noqa: BLE001 - reading a Pending, or any other end (pytest's skip): the plan so far
            pass
        offset = len(calls)  # a case's objects are numbered by its own calls: renumbered for the whole table
        calls += [(index, name, dict(message, handle={"__item__": message["handle"]["__item__"] + offset})
                   if isinstance(message.get("handle"), dict) else message) for name, message in planner.calls]
        if len(calls) >= MAX_AHEAD:
            break
    return calls[:MAX_AHEAD]


def no_turns(case: int) -> None:
    """What :meth:`RemoteSubmission.calls_ahead` yields where nothing is planned."""


# ---------------------------------------------------------------- the plan of one table, on the judge's side

@dataclass(frozen=True)
class Plan:
    """The planned calls of one table, encoded (``planned``: ``((name, encoded message, blobs), ...)``), each
    one's case (``cases``) and the first one's key (``first``): what a judge keeps, shared by every submission
    (nothing here is changed after it is made; an :class:`Ahead` takes its own copy of the list to send)."""

    planned: tuple[tuple[str, dict, list], ...]
    cases: tuple[int, ...]
    first: tuple | None
    keys: tuple[tuple | None, ...]  # each call's key, where it names no object the batch makes (else None)

    @classmethod
    def of(cls, calls: list[tuple[int, str, dict]]) -> Plan:
        """The plan of ``calls`` (:func:`plan`'s list), encoded."""
        planned = tuple((name, *encoded(message)) for _, name, message in calls)
        keys = tuple(None if isinstance(message.get("handle"), dict) else key_of(message, blobs)
                     for _, message, blobs in planned)
        return cls(planned, tuple(case for case, _, _ in calls), keys[0] if planned else None, keys)


class Plans:
    """The plans one judge has made, by the name its suite gives each (a check and its arguments): a named plan
    is made at its first submission and reused by every later one. Owned by a :class:`~.grade.Judge`."""

    def __init__(self) -> None:
        self._made: dict[Hashable, Plan | None] = {}

    def made(self, key: Hashable, make: Callable[[], Plan | None]) -> Plan | None:
        """The plan named ``key``, made by ``make()`` the first time (None, a plan that cannot be made, is kept
        too)."""
        if key in self._made:
            return self._made[key]
        plan = make()
        if len(self._made) < MAX_PLANS:
            self._made[key] = plan
        return plan


class Ahead:
    """The planned calls of one table not sent yet (``planned``: ``[(name, encoded message, blobs)]``, ``cases``:
    each one's case, the first one's key ``first``), then the replies sent back for them not taken yet (by key,
    in order). A reply is taken only while its own case runs (:meth:`turn`), so a call another case makes (a
    gate tried after a failure, say) never takes an answer the worker gave ahead for a later case."""

    def __init__(self, plan: Plan) -> None:
        self.planned = list(plan.planned)
        self.cases = plan.cases
        self.first = plan.first
        self.keys = plan.keys
        self.replies: dict[tuple, collections.deque] = {}
        self.generation = None  # the worker's generation the batch went to, once sent
        self.case = 0  # the case running now

    def turn(self, case: int) -> None:
        """Case number ``case`` of the table runs now."""
        self.case = case

    def take(self, key: tuple):
        """The ``(reply, decode)`` kept for a request with ``key`` of the case running now, or None."""
        kept = self.replies.get(key)
        if kept and kept[0][0] == self.case:
            return kept.popleft()[1]
        return None

    def keep(self, key: tuple, answer: tuple, case: int) -> None:
        self.replies.setdefault(key, collections.deque()).append((case, answer))


def with_handle(message: dict, blobs: list, made: dict[int, int]) -> tuple | None:
    """The key of a planned ``message`` that names an object the batch made, once the objects are known
    (``made``: item index -> the worker's handle); None when that item made no object."""
    handle = message.get("handle")
    if not isinstance(handle, dict) or handle.get("__item__") not in made:
        return None
    return key_of(dict(message, handle=made[handle["__item__"]]), blobs)
