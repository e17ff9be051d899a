"""Helpers shared by the hidden tests (trusted code: runs in the judge, never in a worker)."""

import contextlib
import functools
import inspect
import random
import zlib
from pathlib import Path

import torch

from autograder.lesson_api import (Gates, Handle, StudentError, SubmissionFailure, Symptom, Unsupported, WrongShape,
                                   shape_symptom)

from ..public_checks import load_public_checks


def each_case(count=4, examples=(), **choices):
    """Run the decorated check once per case, stopping at the first that fails.

    The cases are: every argument at its first choice (the smallest sizes), the ``examples``, then ``count``
    drawn from ``choices`` (argument name -> the values it may take) by a generator seeded with the check's
    name, so every student meets the same cases in the same order. The check keeps its other arguments
    (``student``, ``reference``) as its signature for pytest. A failure notes its case, for whoever runs the
    checks by hand; feedback shows only the concept.
    """

    def decorate(check):
        draw = random.Random(zlib.crc32(check.__name__.encode()))
        cases = [{name: values[0] for name, values in choices.items()}, *map(dict, examples)]
        cases += [{name: draw.choice(values) for name, values in choices.items()} for _ in range(count)]
        unique = list({tuple(sorted(case.items())): case for case in cases}.values())

        def run(*args, **kwargs):
            # The calls every case makes before it reads an answer go to the worker together (see the engine's
            # judge/ahead.py): one turn between judge and worker for the table, not one a call.
            student = kwargs["student"] if "student" in kwargs else args[0]
            ahead = getattr(student, "calls_ahead", None) if len(unique) > 1 else None
            plans = [functools.partial(_with_student, check, args, kwargs, case) for case in unique]
            # Named by the check's cases: within one hidden test, the same cases make the same calls.
            with ahead(plans, key=repr(unique)) if ahead is not None else contextlib.nullcontext() as turn:
                for index, case in enumerate(unique):
                    if turn is not None:
                        turn(index)  # the answers given ahead for this case may be taken now, no other case's
                    try:
                        check(*args, **kwargs, **case)
                    except Exception as error:
                        error.add_note(f"case: {case}")
                        raise

        signature = inspect.signature(check)
        run.__signature__ = signature.replace(parameters=[parameter for parameter in signature.parameters.values()
                                                          if parameter.name not in choices])
        for attribute in ("__name__", "__qualname__", "__doc__", "__module__"):
            setattr(run, attribute, getattr(check, attribute))
        run.cases = unique
        return run

    return decorate


class Calls:
    """How one check makes the calls it reads later, each a :class:`Later` (``later = Calls(student)``, then
    ``later(lambda: ...)``). While the check is planned (the engine's judge/ahead.py runs it first with a planner
    in place of the student) each call is made at once, so the plan holds every call the check makes before it
    reads an answer, and they go to the worker together (one turn). When the check runs, each call is made where
    its answer is read, in the check's own order, and takes its reply from that turn: the same calls in the same
    order as a check that calls and reads one by one, so a call it never reaches (after a failure) is never
    made."""

    __slots__ = ("planning",)

    def __init__(self, student):
        self.planning = getattr(student, "planning", False)

    def __call__(self, call):
        return Later(call, at_once=self.planning)


class Later:
    """A call whose answer is read later (:meth:`get`): made there, or at once while the check is planned (see
    :class:`Calls`). What the call raised is raised by :meth:`get`, where its answer is read."""

    __slots__ = ("_call", "_value")

    def __init__(self, call, at_once=False):
        self._call, self._value = call, None
        if at_once:  # planning: an answer is a stand-in, and a call that is not planned ends the plan here
            self._call, self._value = None, call()

    def get(self):
        if self._call is not None:
            call, self._call = self._call, None
            self._value = call()
        return self._value


def _with_student(check, args, kwargs, case, student):
    """``check`` for ``case`` with ``student`` in place of the one it was given (a planner, while planning)."""
    if "student" in kwargs:
        return check(*args, **dict(kwargs, student=student), **case)
    return check(student, *args[1:], **kwargs, **case)


@contextlib.contextmanager
def student_raises(type_name):
    """Expect the student's call inside the block to raise ``type_name`` (or a subclass of it)."""
    try:
        yield
    except StudentError as error:
        if error.is_a(type_name):
            return
        raise
    raise AssertionError(f"expected {type_name}")


def tensor(value, shape=None, dtype=None):
    """Assert the student returned a tensor (of ``shape`` / ``dtype`` when given); return it."""
    assert isinstance(value, torch.Tensor) and not isinstance(value, (Handle, Unsupported)), "not a tensor"
    if shape is not None and tuple(value.shape) != tuple(shape):
        raise WrongShape(shape_symptom(tuple(value.shape), tuple(shape)))
    if dtype is not None and value.dtype != dtype:  # the dtype a docstring asks for is no hidden value
        raise Symptom(f"returned {str(value.dtype).removeprefix('torch.')} where "
                      f"{str(dtype).removeprefix('torch.')} is expected")
    return value


def pair(value):
    """Assert the student returned a 2-tuple (or list) of tensors; return it as a tuple."""
    assert isinstance(value, (tuple, list)) and len(value) == 2, "not an (output, weights) pair"
    return tensor(value[0]), tensor(value[1])


def close(actual, expected, atol=1e-5, rtol=1e-5):
    """Assert ``actual`` is a tensor of ``expected``'s shape and within tolerance of it (compared in float64)."""
    actual = tensor(actual, expected.shape)
    assert actual.device.type != "meta", "a tensor from the fake device has no values"
    ok = torch.allclose(actual.double(), expected.double(), atol=atol, rtol=rtol)
    assert ok, "values differ"


def is_close(actual, expected, atol=1e-5, rtol=1e-5, equal_nan=False):
    """Whether ``actual`` is a tensor of ``expected``'s shape within tolerance of it (no assertion)."""
    return (isinstance(actual, torch.Tensor) and not isinstance(actual, (Handle, Unsupported))
            and actual.device.type != "meta" and tuple(actual.shape) == tuple(expected.shape)
            and torch.allclose(actual.double(), expected.double(), atol=atol, rtol=rtol, equal_nan=equal_nan))


def randn(*shape, seed=0, dtype=torch.float32):
    """Deterministic normal samples (the same for every student)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=dtype)


# ---------------------------------------------------------------- reading a positional-encoding table

def sine_pairs(table, tolerance=1e-3):
    """The (sine, cosine) column pairs of a table ``(positions, d_model)``, wherever its layout put them.

    Two columns form a pair when their squares add up to 1 at every position (the sine and the cosine of one
    angle). Pairs are ordered by their first column (pair i of an interleaved table is (2i, 2i+1), of a
    [sin | cos] table (i, i + d_model/2)) and oriented so that the angle ``atan2(sine, cosine)`` grows with the
    position. Returns ``[(sine column, cosine column)]``, or None when some column has no partner.
    """
    table = table.double()
    width = table.shape[1]
    fit = (table[:, :, None] ** 2 + table[:, None, :] ** 2 - 1).abs().amax(0) < tolerance  # (d, d)
    fit.fill_diagonal_(False)
    pairs, used = [], set()
    for a in range(width):
        if a in used:
            continue
        partners = [b for b in fit[a].nonzero().flatten().tolist() if b not in used]
        if not partners:
            return None
        used |= {a, partners[0]}
        pairs.append((a, partners[0]))
    rates = angle_rates(table, pairs)
    return [(a, b) if rate >= 0 else (b, a) for (a, b), rate in zip(pairs, rates.tolist())]


def unwrapped_angle(sine, cosine):
    """The angle ``atan2(sine, cosine)`` along the positions (dimension 0), unwrapped (steps taken in
    (-pi, pi]), float64."""
    angle = torch.atan2(sine.double(), cosine.double())
    step = torch.remainder(angle.diff(dim=0) + torch.pi, 2 * torch.pi) - torch.pi
    return torch.cat((angle[:1], angle[:1] + step.cumsum(0)))


def angle_rates(table, pairs):
    """Radians per position of each (sine, cosine) pair's angle, signed: least-squares slopes, shape ``(pairs,)``."""
    table = table.double()
    sines, cosines = zip(*pairs)
    angle = unwrapped_angle(table[:, list(sines)], table[:, list(cosines)])  # (positions, pairs)
    positions = torch.arange(len(angle), dtype=torch.float64)[:, None]
    positions = positions - positions.mean()
    return (positions * (angle - angle.mean(0))).sum(0) / positions.pow(2).sum().clamp_min(1e-12)


def pair_rates(table, pairs):
    """``|radians per position|`` of each pair, in pair order."""
    return angle_rates(table, pairs).abs()


def recurrence_residual(table):
    """How far each column is from one steady sine wave: ``max |c[p+1] + c[p-1] - 2 k c[p]|`` with the best k of
    each column (any frequency, phase and layout satisfy it exactly; a stall or a jump does not). In float32:
    its rounding (about 1e-7) is far below any tolerance it is used with, and a long table costs half as much."""
    table = table.float()
    middle, around = table[1:-1], table[2:] + table[:-2]
    k = (middle * around).sum(0) / (2 * middle.pow(2).sum(0)).clamp_min(1e-12)
    return float((around - 2 * k * middle).abs().max()) if len(middle) else 0.0


# ---------------------------------------------------------------- multi-head attention, checked by recomputing

# The twin and the projections' names are the public tests' own (one copy of how weights map onto torch's).
PROJECTIONS = load_public_checks().PROJECTIONS


def projections(state, d_model):
    """The four projections' ``(weight, bias)`` from a module's fetched tensors (``module.tensors()``: every
    parameter by every name, aliases included); a missing bias is zeros (the bias is checked on its own)."""
    assert isinstance(state, dict) and isinstance(state.get("parameters"), dict), "no parameters"
    parameters = state["parameters"]
    weights = {}
    for name in PROJECTIONS:
        weight = tensor(parameters.get(f"{name}.weight"), (d_model, d_model))
        bias = parameters.get(f"{name}.bias")
        weights[name] = (weight, torch.zeros(d_model) if bias is None else tensor(bias, (d_model,)))
    return weights


def torch_twin(weights, d_model, num_heads):
    """``torch.nn.MultiheadAttention`` carrying the four projections of :func:`projections`."""
    return load_public_checks().torch_twin(weights, d_model, num_heads)


# The gradient check's finite differences move a projection's weights by 1e-2 along a direction and read the
# change of the float32 loss (the squared output). Its thresholds are shares of that loss, never absolute
# numbers, so a module with small weights (small outputs, small gradients) is judged as one with large. A true
# gradient of the lesson's module moves the loss by 1e-4 of it per unit or more (the keys' are the smallest;
# measured over many draws of the weights); a weight off the path moves it by nothing at all (the same float32
# operations run), so the floor sits well below the smallest true gradient. Agreement allows the step's own
# error: up to 3e-4 of the loss beyond 1% of the gradient over those draws.
REACH_FLOOR = 1e-5
AGREE_FLOOR = 1e-3


def gradient_reaches(measured: float, loss: float) -> bool:
    """Whether a directional derivative ``measured`` (a finite difference of ``loss``, the forward's squared
    output) is a gradient at all: above what rounding of a loss that size can make (relative, never absolute)."""
    return abs(measured) > REACH_FLOOR * abs(loss)


def gradient_agrees(claimed: float, measured: float, loss: float) -> bool:
    """Whether the gradient the worker reported (``claimed``, along the same direction) is the measured one:
    within 1% of it, or within the finite difference's own error, relative to the loss."""
    return abs(claimed - measured) <= 1e-2 * abs(measured) + AGREE_FLOOR * abs(loss)


def module_and_twin(student, d_model, num_heads, run=lambda module: None, later=None):
    """A student's MultiHeadAttention, its projections (fetched), ``torch.nn.MultiheadAttention`` with them and
    the answer of ``run(module)``; ``(module, weights, twin, answer)``, read by the function returned. Its calls
    are the check's :class:`Calls` (``later``, when it makes others): planned before any answer is read, so
    several modules started before the first is read go to the worker together, and made when read, in that
    order, each failing there."""
    later = later or Calls(student)
    module = later(lambda: student.MultiHeadAttention(d_model, num_heads))
    state = later(lambda: module.get().tensors())
    answer = later(lambda: run(module.get()))

    def read():
        made = module.get()
        weights = projections(state.get(), d_model)
        return made, weights, torch_twin(weights, d_model, num_heads), answer.get()

    return read


def expected_attention(student, weights, twin, x, num_heads, mask=None):
    """What a MultiHeadAttention with these weights may return for ``x``: ``(output, per-head weights)`` pairs.

    First ``torch.nn.MultiheadAttention``'s; then the same composition (project, split, attend, combine,
    out_proj) made of the student's own ``split_heads``, ``scaled_dot_product_attention`` and ``combine_heads``:
    a module that composes the parts correctly keeps its points when a part is wrong, since that part's own
    checks charge for it. A generator, so a module that matches the first pays for nothing more.
    """
    blocked = None if mask is None else ~mask
    if blocked is not None and blocked.dim() == 4:  # (batch, 1 or heads, seq, seq): torch takes (batch * heads, ...)
        blocked = blocked.expand(x.shape[0], num_heads, x.shape[1], x.shape[1]).reshape(-1, x.shape[1], x.shape[1])
    with torch.no_grad():
        out, per_head = twin(x, x, x, attn_mask=blocked, average_attn_weights=False)
    yield out, per_head
    try:
        q, k, v = (tensor(student.split_heads(x @ weights[n][0].T + weights[n][1], num_heads))
                   for n in PROJECTIONS[:3])
        attended, per_head = pair(student.scaled_dot_product_attention(q, k, v, mask=mask))
        combined = tensor(student.combine_heads(attended), x.shape)
    except (AssertionError, SubmissionFailure):
        return
    yield combined @ weights["out_proj"][0].T + weights["out_proj"][1], per_head


# ---------------------------------------------------------------- charged once: each part's gate

def _pe_table(student):
    # Two lengths of one width: a table kept from an earlier call (a cache by width) has the wrong rows for one.
    tensor(student.get_positional_encoding(20, 8), (20, 8))
    tensor(student.get_positional_encoding(7, 8), (7, 8))


def _pe_module(student):
    tensor(student.PositionalEncoding(8, max_seq_len=20)(randn(2, 6, 8, seed=40)), (2, 6, 8))


def _split(student):
    tensor(student.split_heads(randn(2, 5, 12, seed=41), 3), (2, 3, 5, 4))


def _split_refuses_ranks(student):
    # The module may leave its rank check to split_heads (its docstring says so): a split that lets another rank
    # through is charged by its own validation check, and the module is graded with a split that refuses it.
    for x in (randn(5, 8, seed=36), randn(1, 2, 5, 8, seed=37)):
        try:
            student.split_heads(x, 2)
        except StudentError as error:
            if error.is_a("ValueError"):
                continue
        return "validation", "does not refuse input that is not 3-D yet (see its validation check)"
    return None


def _split_one_head(student):
    tensor(student.split_heads(randn(2, 5, 4, seed=53), 1), (2, 1, 5, 4))


def _as_recipe(student, name, *args):
    """Whether the student's ``name`` gives what the lesson's recipe gives for ``args`` (every tensor answered)."""
    mine, expected = getattr(student, name)(*args), recipe(name)(*args)
    if isinstance(expected, tuple) and not (isinstance(mine, (tuple, list)) and len(mine) == len(expected)):
        return False
    pairs = zip(mine, expected) if isinstance(expected, tuple) else [(mine, expected)]
    return all(is_close(got, want, atol=1e-5) for got, want in pairs)


def _split_values(student):
    # The code built on split_heads runs with the stand-in when split_heads gives other values at the right shape.
    if not _as_recipe(student, "split_heads", randn(2, 5, 12, seed=41), 3):
        return "heads-chunks", "does not give each head its own chunk of features yet (see its own checks)"
    return None


def _combine_values(student):
    if not _as_recipe(student, "combine_heads", randn(2, 3, 5, 4, seed=42)):
        return "heads-combine", "does not put the heads back in order yet (see its own checks)"
    return None


def _attention_values(student):
    q, k, v = randn(2, 3, 4, 5, seed=54), randn(2, 3, 6, 5, seed=55), randn(2, 3, 6, 2, seed=56)
    causal = torch.tril(torch.ones(4, 6, dtype=torch.bool))
    if not (_as_recipe(student, "scaled_dot_product_attention", q, k, v)
            and _as_recipe(student, "scaled_dot_product_attention", q, k, v, causal)):
        return "sdpa-scaling", "does not compute softmax(q k^T / sqrt(d)) v yet (see its own checks)"
    return None


def _softmax_over_keys(student):
    q = randn(2, 3, 4, 5, seed=57)
    _, weights = pair(student.scaled_dot_product_attention(q, q[..., :3, :], q[..., :3, :2]))
    if not is_close(tensor(weights, (2, 3, 4, 3)).sum(-1), torch.ones(2, 3, 4), atol=1e-5):
        return "sdpa-softmax", "does not normalise each query's weights over the keys yet (see its softmax check)"
    return None


def _combine(student):
    tensor(student.combine_heads(randn(2, 3, 5, 4, seed=42)), (2, 5, 12))


def _attention(student):
    q = randn(2, 3, 5, 4, seed=43)
    out, weights = pair(student.scaled_dot_product_attention(q, q, q))
    tensor(out, (2, 3, 5, 4))
    tensor(weights, (2, 3, 5, 5))


def _attention_mask(student):
    q = randn(1, 2, 4, 3, seed=45)
    causal = torch.tril(torch.ones(4, 4, dtype=torch.bool))
    _, weights = pair(student.scaled_dot_product_attention(q, q, q, mask=causal))
    if not is_close(tensor(weights, (1, 2, 4, 4)).masked_fill(causal, 0.0), torch.zeros(1, 2, 4, 4), atol=1e-6):
        return "sdpa-mask", "does not give blocked keys zero weight yet (see its mask check)"
    return None


def _steady_table(student):
    if recurrence_residual(tensor(student.get_positional_encoding(3000, 16), (3000, 16))) >= 2e-3:
        return "pe-long-sequences", "gives columns that stall or jump on long tables (see its long-sequence check)"
    return None


def _frequencies(student):
    table = tensor(student.get_positional_encoding(64, 16), (64, 16))
    pairs = sine_pairs(table)
    if pairs is None or not is_close(pair_rates(table, pairs), expected_rates(16), atol=1e-6, rtol=1e-3):
        return "pe-frequencies", "does not give every pair its frequency yet (see its frequency check)"
    return None


def _true_table(student):
    # The tables the module checks build: the lesson's own at those sizes (a layout or a base the table gets wrong
    # is charged by the table's checks; the module is then graded with the stand-in's table).
    for size in ((20, 8, BASE_OF_MODULE), (50, 16, 10000.0)):
        if not is_close(student.get_positional_encoding(*size), recipe("get_positional_encoding")(*size), atol=1e-5):
            return "pe-values", "does not give the lesson's table yet (see its own checks)"
    return None


def expected_rates(d_model, base=10000.0):
    """``base ** (-2i / d_model)`` for each pair i."""
    return float(base) ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)


def _module(student):
    module, x = student.MultiHeadAttention(8, 2), randn(2, 5, 8, seed=44)
    out, weights = pair(module(x, return_weights=True))
    tensor(out, (2, 5, 8))
    tensor(weights, (2, 2, 5, 5))
    # Two seeds, two outputs: the forward draws random numbers (a dropout left active), and no value of it can
    # be compared with anything; that one concept is charged, not every check the noise would fail.
    if not is_close(tensor(module.call_seeded(1, x), (2, 5, 8)), tensor(module.call_seeded(2, x), (2, 5, 8)),
                    atol=0, rtol=0):
        return "mha-determinism", "gives two different outputs for one input (randomness, such as dropout, in forward)"
    return None


# Each gate: the part it tries, the concept its failure is charged to (a gate may name another), and the gate
# itself: the call the module makes, on the rank the module uses (the shape checks try every size; a gate is one
# ordinary call), returning None when the part works or ``(topic, reason)`` when it does not in some other way.
PARTS = {
    "get_positional_encoding": ("get_positional_encoding", "pe-shape", _pe_table),
    "steady table": ("get_positional_encoding", "pe-shape", _steady_table),
    "frequencies": ("get_positional_encoding", "pe-shape", _frequencies),
    "true table": ("get_positional_encoding", "pe-shape", _true_table),
    "PositionalEncoding": ("PositionalEncoding", "pe-module-forward", _pe_module),
    "split_heads": ("split_heads", "heads-shape", _split),
    "split refuses ranks": ("split_heads", "validation", _split_refuses_ranks),
    "split one head": ("split_heads", "heads-shape", _split_one_head),
    "split values": ("split_heads", "heads-chunks", _split_values),
    "combine_heads": ("combine_heads", "heads-shape", _combine),
    "combine values": ("combine_heads", "heads-combine", _combine_values),
    "scaled_dot_product_attention": ("scaled_dot_product_attention", "sdpa-shapes", _attention),
    "softmax over keys": ("scaled_dot_product_attention", "sdpa-softmax", _softmax_over_keys),
    "attention mask": ("scaled_dot_product_attention", "sdpa-mask", _attention_mask),
    "attention values": ("scaled_dot_product_attention", "sdpa-scaling", _attention_values),
    "MultiHeadAttention": ("MultiHeadAttention", "mha-shapes", _module),
}
# What the module is built on: each part's shapes, then its values (the lesson's, or the part runs as its stand-in).
MODULE_PARTS = ("split_heads", "split one head", "split values", "scaled_dot_product_attention", "attention values",
                "combine_heads", "combine values")

# The parts with a stand-in (the lesson's recipe, ../stand_ins.py): a check of other code that uses one of them,
# when that part fails its own gate, is graded again with the stand-in in its place (see the engine's Gates).
STAND_INS = ("get_positional_encoding", "split_heads", "combine_heads", "scaled_dot_product_attention")
GATES = Gates(PARTS, Path(__file__).resolve().parent.parent / "stand_ins.py", STAND_INS)
_STAND_IN_SOURCE = GATES.source
BASE_OF_MODULE = 100.0  # a base other than the default: a module that drops its base keeps the default's table

# The lesson's gates, by their old names (every check uses these): see the engine's Gates for what each does.
broken, first, needs, recipe = GATES.broken, GATES.first, GATES.needs, GATES.recipe
graded_on_its_own, own_of, stand_in_source = GATES.graded_on_its_own, GATES.own_of, GATES.stand_in_source
