"""A call can report which of its arguments it changed in place, so a hidden test can check a docstring's "inputs
are left unchanged by every call": the worker compares each argument with a copy it took before the call (only
when asked), and the judge takes the answer as data, checked like every other reply field."""

import math

import pytest
import torch

from autograder.sandbox import clocks
from autograder.lesson.catalogue import Edit, Mutant, build
from autograder.judge.remote import RemoteSubmission
from autograder.judge.failures import BadValue
from autograder.sandbox.isolation import Limits, choose_sandbox
from autograder.worker import protocol
from autograder.worker.session import run_call
from lesson import CONTRACT, LESSON
from workers import remote_over, worker_factory

NAN = float("nan")

# ------------------------------------------------------------------ the worker's watch, in this process


def _changed(function, *args, **kwargs):
    reply = run_call(function, list(args), kwargs, report_changes=True)
    assert set(reply) == {"value", "changed"}
    return reply["changed"]


@pytest.mark.parametrize("function, args, kwargs, expected", [
    (lambda x, s: x.mul_(s), (torch.ones(3), 2.0), {}, ["arg0"]),
    (lambda x, y: y.div_(2), (torch.ones(2), torch.ones(2)), {}, ["arg1"]),
    (lambda x, mask=None: mask.logical_not_(), (torch.ones(2),), {"mask": torch.tensor([True, False])}, ["mask"]),
    (lambda x: x.nan_to_num_(), (torch.tensor([NAN, 1.0]),), {}, ["arg0"]),  # a NaN that became a number
    (lambda x: x.fill_(NAN), (torch.zeros(2),), {}, ["arg0"]),  # a number that became NaN
    (lambda x: x.resize_(2), (torch.zeros(2, 2),), {}, ["arg0"]),  # an in-place resize: the shape
    (lambda x: x.t_(), (torch.eye(3),), {}, ["arg0"]),  # symmetric, same shape: only the strides tell
    (lambda x: x.as_strided_((2,), (1,), 1), (torch.zeros(3),), {}, ["arg0"]),  # same values, another offset
    (lambda xs: xs[1].add_(1), ([torch.zeros(1), torch.zeros(1)],), {}, ["arg0"]),  # a tensor inside a list
    (lambda xs: xs.append(torch.zeros(1)), ([torch.zeros(1)],), {}, ["arg0"]),  # the list itself
    (lambda xs: xs.__setitem__(0, torch.zeros(1)), ([torch.zeros(1)],), {}, ["arg0"]),  # an equal tensor swapped in
    (lambda xs: xs.append(xs), ([torch.zeros(1)],), {}, ["arg0"]),  # made to contain itself: still answered
    (lambda xs: xs.extend([xs] * 50), ([torch.zeros(1)],), {}, ["arg0"]),  # and 50 times: 50 ** 32 paths
])
def test_the_watch_sees_every_kind_of_change(function, args, kwargs, expected):
    assert _changed(function, *args, **kwargs) == expected


@pytest.mark.parametrize("function, args", [
    (lambda x: x + 1, (torch.tensor([NAN, 1.0, math.inf]),)),  # NaN stays NaN: torch.equal would call it changed
    (lambda x: x.add_(0), (torch.tensor([NAN, -math.inf]),)),  # written to, values as they were
    (lambda x, n: x.view(n, -1), (torch.arange(6), 2)),
    (lambda x: x.transpose(0, 1).contiguous(), (torch.zeros(2, 3, dtype=torch.bool),)),
    (lambda xs: xs[0] * 2, ([torch.zeros(2, dtype=torch.complex64), (torch.ones(1),)],)),
    (lambda x: x, (torch.empty(0, 4),)),
])
def test_the_watch_reports_nothing_when_the_inputs_are_left_alone(function, args):
    assert _changed(function, *args) == []


def test_an_ordinary_call_returns_its_value_and_copies_nothing():
    x = torch.ones(2)
    assert run_call(lambda t: t.mul_(3), [x], {}) is x and torch.equal(x, torch.full((2,), 3.0))


# ------------------------------------------------------------------ through a real worker


@pytest.fixture(scope="module")
def factory():
    with worker_factory("changes-", call_seconds=10.0) as made:
        yield made


def _built(tmp_path, ident, *edits):
    """The reference with ``edits`` (``(file, old, new)``) applied, as a submission folder."""
    mutant = Mutant(id=ident, title=ident, edits=tuple(Edit(file=file, old=old, new=new) for file, old, new in edits))
    return build(mutant, tmp_path / ident, LESSON)


def _inputs():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 8)
    x[0, 1, 2] = NAN  # a NaN sent must not read as a change
    q, k, v = (torch.randn(2, 2, 3, 4) for _ in range(3))
    causal = torch.ones(3, 3, dtype=torch.bool).tril()
    return x, q, k, v, causal


def _same(a, b):
    return a.shape == b.shape and torch.allclose(a, b, rtol=0, atol=0, equal_nan=True)


def test_the_reference_changes_none_of_its_inputs(tmp_path, factory):
    x, q, k, v, causal = _inputs()
    remote = remote_over(factory, _built(tmp_path, "reference"))
    try:
        value, changed = remote.call_reporting_changes("split_heads", x, 4)
        assert changed == () and _same(value, remote.split_heads(x, 4)), "the usual result comes with the report"
        value, changed = remote.call_reporting_changes("combine_heads", q)
        assert changed == () and _same(value, remote.combine_heads(q))
        (out, weights), changed = remote.call_reporting_changes("scaled_dot_product_attention", q, k, v, mask=causal)
        assert changed == () and _same(out, remote.scaled_dot_product_attention(q, k, v, mask=causal)[0])
        assert (weights[..., ~causal] == 0).all()
        module = remote.MultiHeadAttention(8, 2)
        value, changed = module.forward_reporting_changes(x.nan_to_num(), mask=causal)
        assert changed == () and _same(value, module(x.nan_to_num(), mask=causal))
        encoding = remote.PositionalEncoding(8, 16)
        value, changed = encoding.forward_reporting_changes(x)
        assert changed == () and _same(value, encoding(x))
    finally:
        remote.close()


# Each a student's in-place edit of an argument, and the names it must be reported under.
IN_PLACE = {
    "q-divided-in-place": (("attention.py", "scores = (q * scale) @ k.transpose(-2, -1)",
                            "q /= math.sqrt(q.shape[-1])\n    scores = q @ k.transpose(-2, -1)"), ("arg0",)),
    "mask-inverted-in-place": (("attention.py", "scores = scores.masked_fill(~mask, float(\"-inf\"))",
                                "scores = scores.masked_fill(mask.logical_not_(), float(\"-inf\"))"), ("mask",)),
    "heads-transposed-in-place": (("heads.py", "    x = x.transpose(1, 2)  # (batch, seq, heads, head_dim)",
                                   "    x.transpose_(1, 2)"), ("arg0",)),
    "encoding-added-in-place": (("positional_encoding.py", "return x + self.pe[:seq_len]",
                                 "x += self.pe[:seq_len]\n        return x"), ("arg0",)),
}


def _call_changing(remote, ident):
    """The call of the part ``ident`` edits, reporting changes."""
    x, q, k, v, causal = _inputs()
    if ident.startswith(("q-", "mask-")):
        return remote.call_reporting_changes("scaled_dot_product_attention", q, k, v, mask=causal)
    if ident.startswith("heads-"):
        return remote.call_reporting_changes("combine_heads", q)
    return remote.PositionalEncoding(8, 16).forward_reporting_changes(x)


@pytest.mark.parametrize("ident", sorted(IN_PLACE))
def test_a_call_that_changes_its_input_in_place_is_reported(ident, tmp_path, factory):
    edit, expected = IN_PLACE[ident]
    remote = remote_over(factory, _built(tmp_path, ident, edit))
    try:
        value, changed = _call_changing(remote, ident)
        assert changed == expected
        assert value is not None
    finally:
        remote.close()


# ------------------------------------------------------------------ what the judge accepts from a worker


class _Output:
    def text(self):
        return ""


class ScriptedWorker:
    """A worker whose reply to every call is ``answer`` (a Python value, encoded as the protocol does); an import
    and a construction are answered as a real worker would."""

    hello = {"ready": True, "cuda": False}
    cpu_start = last_cpu = 0.0

    def __init__(self, answer):
        self.answer, self.sent = answer, []
        self.imported, self.output = set(), _Output()

    def ready(self, deadline):
        return self.hello

    def cpu_mark(self):
        return 0.0

    def usage(self):
        return clocks.Usage(0.0, 0.0, False, True)

    def send(self, message, blobs, deadline):
        self.sent.append(dict(message))
        return "nonce"

    def replied(self, seconds):
        return True

    def receive(self, nonce, deadline, max_reply=0):
        op, blobs = self.sent[-1]["op"], []
        if op == "import":
            return {"value": None}, []
        if op == "new":
            return {"value": {"__handle__": 1, "type": "Module"}}, []
        return {"value": protocol.encode(self.answer, blobs)}, blobs

    def exit_detail(self):
        return "killed"

    def close(self):
        pass


def _scripted(answer):
    workers = []

    def launch():
        workers.append(ScriptedWorker(answer))
        return workers[-1]

    sandbox = choose_sandbox("none", limits=Limits(call_seconds=5.0))
    return RemoteSubmission(sandbox, launch, CONTRACT), workers


T = torch.zeros(2)


def test_a_well_formed_report_is_taken_in_the_calls_order():
    remote, workers = _scripted({"value": T, "changed": ["mask", "arg1"]})
    value, changed = remote.call_reporting_changes("scaled_dot_product_attention", T, T, T, mask=T)
    assert torch.equal(value, T) and changed == ("arg1", "mask")
    assert workers[0].sent[-1]["report_changes"] is True
    module = remote.MultiHeadAttention(2, 1)
    assert module.forward_reporting_changes(T, T, mask=T)[1] == ("arg1", "mask")
    assert workers[0].sent[-1]["report_changes"] is True and workers[0].sent[-1]["op"] == "method"


def test_an_ordinary_call_does_not_ask_for_a_report():
    remote, workers = _scripted(T)
    assert torch.equal(remote.split_heads(T, 1), T) and torch.equal(remote.MultiHeadAttention(2, 1)(T), T)
    assert not any("report_changes" in message for message in workers[0].sent)


@pytest.mark.parametrize("answer", [
    T,  # a worker that ignored the request
    {"value": T},
    {"value": T, "changed": [], "extra": 1},
    {"value": T, "changed": "arg0"},
    {"value": T, "changed": ("arg0",)},
    {"value": T, "changed": {"arg0": True}},
    {"value": T, "changed": [0]},
    {"value": T, "changed": [None]},
    {"value": T, "changed": ["arg7"]},  # an argument never sent
    {"value": T, "changed": ["x"]},
    {"value": T, "changed": ["arg0", "arg0"]},
    {"value": T, "changed": ["arg0", "arg1", "mask", "arg0"]},  # more names than arguments
    {"value": T, "changed": ["arg0" * 10_000]},
], ids=lambda answer: repr(answer)[:60])
def test_a_malformed_report_is_refused_cleanly(answer):
    remote, workers = _scripted(answer)
    for call in (lambda: remote.call_reporting_changes("scaled_dot_product_attention", T, T, T, mask=T),
                 lambda: remote.MultiHeadAttention(2, 1).forward_reporting_changes(T, mask=T)):
        with pytest.raises(BadValue) as caught:
            call()
        assert "no well-formed report of the arguments it changed" in caught.value.summary
    assert len(workers) == 1, "a bad report fails its call only: the worker is kept"
