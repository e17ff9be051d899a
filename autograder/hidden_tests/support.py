"""Helpers shared by the hidden tests (trusted code: runs in the judge, never in a worker)."""

import contextlib

import torch
from hypothesis import HealthCheck, Phase, settings

from ..remote import StudentError
from ..worker.protocol import Handle, Unsupported, device_of

# Same examples for every student (derandomize), no shrinking (each example is a round trip to the worker).
GRADING = settings(max_examples=5, deadline=None, derandomize=True, database=None, print_blob=False,
                   phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck),
                   report_multiple_bugs=False)


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
