"""Helpers shared by the hidden tests (trusted code: runs in the judge, never in a worker)."""

import contextlib
import inspect
import random
import zlib

import torch

from ..remote import StudentError
from ..worker.protocol import Handle, Unsupported, device_of


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
            for case in unique:
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
    if shape is not None:
        assert tuple(value.shape) == tuple(shape), f"shape {tuple(value.shape)} instead of {tuple(shape)}"
    if dtype is not None:
        assert value.dtype == dtype, f"dtype {value.dtype} instead of {dtype}"
    return value


def pair(value):
    """Assert the student returned a 2-tuple (or list) of tensors; return it as a tuple."""
    assert isinstance(value, (tuple, list)) and len(value) == 2, "not an (output, weights) pair"
    return tensor(value[0]), tensor(value[1])


def close(actual, expected, atol=1e-5, rtol=1e-5):
    """Assert ``actual`` is a tensor of ``expected``'s shape and within tolerance of it (compared in float64)."""
    actual = tensor(actual, expected.shape)
    assert device_of(actual) != "meta", "a meta tensor has no values"
    ok = torch.allclose(actual.double(), expected.double(), atol=atol, rtol=rtol)
    assert ok, "values differ"


def randn(*shape, seed=0, dtype=torch.float32):
    """Deterministic normal samples (the same for every student)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=dtype)


def torch_twin(state, d_model, num_heads):
    """``torch.nn.MultiheadAttention`` carrying the weights of a student's ``state_dict``."""
    twin = torch.nn.MultiheadAttention(d_model, num_heads, batch_first=True)
    with torch.no_grad():
        twin.in_proj_weight.copy_(torch.cat([state[f"{n}.weight"] for n in ("q_linear", "k_linear", "v_linear")]))
        twin.in_proj_bias.copy_(torch.cat([state[f"{n}.bias"] for n in ("q_linear", "k_linear", "v_linear")]))
        twin.out_proj.weight.copy_(state["out_proj.weight"])
        twin.out_proj.bias.copy_(state["out_proj.bias"])
    return twin.eval()


def student_state(module, d_model):
    """The student's four projections as a ``state_dict``, checked for the contract's names and shapes."""
    state = module.state_dict()
    assert isinstance(state, dict), "state_dict is not a dict"
    for name in ("q_linear", "k_linear", "v_linear", "out_proj"):
        tensor(state.get(f"{name}.weight"), (d_model, d_model))
        tensor(state.get(f"{name}.bias"), (d_model,))
    return state


def module_and_twin(student, d_model, num_heads):
    """A student's MultiHeadAttention and ``torch.nn.MultiheadAttention`` carrying the same weights."""
    module = student.MultiHeadAttention(d_model, num_heads)
    return module, torch_twin(student_state(module, d_model), d_model, num_heads)
