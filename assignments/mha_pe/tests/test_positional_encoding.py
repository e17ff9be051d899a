"""Public tests for positional_encoding.py: shapes, a few exact values, the shift identity.

Each test checks one idea and its message names it, so a failure points at the part to fix.
"""

import math

import pytest
import torch

from checks import must_raise_value_error
from mha_pe import PositionalEncoding, get_positional_encoding, shift_matrix


def formula(pos, dim, d_model, base=10000.0):
    """One entry of the table, straight from the definition (pair index i = dim // 2)."""
    angle = pos / base ** (2 * (dim // 2) / d_model)
    return math.sin(angle) if dim % 2 == 0 else math.cos(angle)


def pair_steps(pe, pair):
    """How far pair ``pair``'s angle turns from each position to the next, read from its (sine, cosine) columns."""
    angle = torch.atan2(pe[:, 2 * pair].double(), pe[:, 2 * pair + 1].double())
    return torch.remainder(angle.diff() + math.pi, 2 * math.pi) - math.pi  # in (-pi, pi]


INTERLEAVE = ("sine and cosine interleave: even feature 2i holds the sine and odd feature 2i+1 the cosine of the same "
              "angle, an angle shared by the sine and the cosine of the pair (so their squares add up to 1); not all "
              "sines first, then all cosines")


def test_table_shape_and_dtype():
    pe = get_positional_encoding(10, 16)
    assert tuple(pe.shape) == (10, 16), (
        f"the table has one row per position and one column per feature: expected (10, 16), got {tuple(pe.shape)}"
    )
    assert pe.dtype == torch.float32, f"the table should be float32 like the embeddings it is added to, got {pe.dtype}"
    shorter = get_positional_encoding(3, 16)  # the same width again: nothing kept from the call above
    assert tuple(shorter.shape) == (3, 16), (
        f"the table has one row per position for every length asked: expected (3, 16) after (10, 16), got "
        f"{tuple(shorter.shape)} (is a table kept from an earlier call?)"
    )


def test_position_zero_is_sin0_cos0():
    pe = get_positional_encoding(4, 8).double()
    assert torch.allclose(pe[0].sort().values, torch.tensor([0.0] * 4 + [1.0] * 4).double(), atol=1e-6), (
        "at position 0 every angle is 0, so the sine features must be 0 and the cosine features 1: positions are "
        f"counted from 0. Row 0 is {pe[0].tolist()}"
    )


def test_sines_and_cosines_interleave():
    pe = get_positional_encoding(20, 8).double()
    assert torch.allclose(pe[:, 0::2] ** 2 + pe[:, 1::2] ** 2, torch.ones(20, 4).double(), atol=1e-4), INTERLEAVE
    assert torch.allclose(pair_steps(pe, 0), torch.ones(19, dtype=torch.float64), atol=1e-4), (
        "even feature 2i holds the sine and odd feature 2i+1 the cosine: read as (sine, cosine), the first pair "
        "(frequency 1 whatever the base) must turn forwards by one radian per position"
    )


def test_each_pair_turns_at_its_frequency():
    d_model = 8
    pe = get_positional_encoding(50, d_model).double()
    assert torch.allclose(pe[:, 0::2] ** 2 + pe[:, 1::2] ** 2, torch.ones(50, 4).double(), atol=1e-4), INTERLEAVE
    rates = torch.stack([pair_steps(pe, i).abs().mean() for i in range(d_model // 2)])
    expected = torch.tensor([10000.0 ** (-2 * i / d_model) for i in range(d_model // 2)], dtype=torch.float64)
    assert torch.allclose(rates, expected, rtol=1e-3, atol=1e-6), (
        "pair i must turn at frequency base^(-2i/d_model) radians per position: the exponent is the even feature "
        f"index 2i divided by d_model (a float division). Measured {rates.tolist()}, expected {expected.tolist()}"
    )


def test_base_changes_the_slow_frequencies():
    # Pair i turns at base ** exponent_i whatever its exponent, so the exponent read back from the table,
    # log(frequency) / log(base), is the same under every base. Small bases keep every pair readable: a pair
    # turning faster than pi radians per position cannot be read from whole positions (its angle wraps around),
    # and with a base of at most 4 an exponent below 3/4 stays under that (only pairs readable under every base
    # count).
    d_model, bases = 8, (2.0, 3.0, 4.0)
    rates, exponents, readable = {}, {}, torch.ones(d_model // 2, dtype=torch.bool)
    for base in bases:
        pe = get_positional_encoding(30, d_model, base=base).double()
        assert torch.allclose(pe[:, 0::2] ** 2 + pe[:, 1::2] ** 2, torch.ones(30, 4).double(), atol=1e-4), INTERLEAVE
        rates[base] = torch.stack([pair_steps(pe, i).abs().mean() for i in range(d_model // 2)])
        exponents[base] = rates[base].log() / math.log(base)
        readable &= rates[base] < 3.0
    agree = all(torch.allclose(exponents[base][readable], exponents[bases[0]][readable], atol=1e-3)
                for base in bases)
    ignored = all(torch.allclose(rates[base], rates[bases[0]], rtol=1e-3) for base in bases)
    assert agree or not ignored, (
        "the base argument sets how slowly the later pairs turn: use the base you are given, not a fixed 10000. "
        f"With base={', '.join(f'{base:g}' for base in bases)} every pair turned at the same rates, "
        f"{rates[bases[0]].tolist()} radians per position"
    )
    assert agree, (
        "pair i must turn at base ** (-2i/d_model) radians per position, a power of the base with an exponent that "
        "does not depend on the base, so log(frequency) / log(base) is the same under every base; measured "
        + "; ".join(f"base={base:g}: {exponents[base][readable].tolist()}" for base in bases)
    )


def test_long_tables_stay_exact():
    pe = get_positional_encoding(3000, 4).double()
    middle, around = pe[1:-1], pe[2:] + pe[:-2]
    cos_w = (middle * around).sum(0) / (2 * middle.pow(2).sum(0))  # each column's cos(frequency)
    assert (around - 2 * cos_w * middle).abs().max() < 2e-3, (
        "far along long sequences each column must still be one steady sine wave (c[p-1] + c[p+1] = 2 cos(w) c[p]): "
        "compute positions and angles in float32 or better; float16 counts whole numbers exactly only up to 2048"
    )


@pytest.mark.parametrize("args", [(0, 8), (5, 7), (5, 0), (5, -2)])
def test_bad_sizes_raise_value_error(args):
    must_raise_value_error(lambda: get_positional_encoding(*args),
                           f"get_positional_encoding{args} (max_seq_len at least 1, d_model positive and even)")


@pytest.mark.parametrize("k", [1, 3, -2])
def test_shift_matrix_moves_the_encoding_by_k(k):
    d_model, n = 8, 12
    pe = torch.tensor([[formula(p, j, d_model) for j in range(d_model)] for p in range(n)])  # the true table
    m = shift_matrix(k, d_model)
    assert tuple(m.shape) == (d_model, d_model), f"the shift matrix is (d_model, d_model), got {tuple(m.shape)}"
    src = torch.arange(max(0, -k), min(n, n - k))
    moved = pe[src] @ m.T  # row-wise M @ PE[pos]
    shifted = f"pos {'-' if k < 0 else '+'} {abs(k)}"  # PE[pos - 2], not PE[pos + -2]
    assert torch.allclose(moved, pe[src + k], atol=1e-5), (
        f"shift_matrix({k}) @ PE[pos] must equal PE[{shifted}] at every position: each (sin, cos) pair is turned by "
        "the fixed angle k * frequency, so M is block diagonal with one 2x2 rotation per pair (expand sin(a+b) and "
        "cos(a+b)); negative k moves backwards"
    )


def test_shift_matrix_takes_the_base_of_its_encoding():
    k, base = 3, 100.0
    position = torch.arange(30, dtype=torch.float64)[:, None]  # (30, 1)
    angles = position * base ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8)  # (30, 4)
    pe = torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(1)  # (30, 8), the table for this base
    moved = pe[:-k] @ shift_matrix(k, 8, base=base).double().T  # row pos: M @ PE[pos]
    assert torch.allclose(moved, pe[k:], atol=1e-4), (
        "shift_matrix(k, d_model, base) moves an encoding built with that same base: each pair turns by k times its "
        "frequency under the base it is given, not under a fixed 10000"
    )


def test_shift_matrix_rejects_odd_width():
    must_raise_value_error(lambda: shift_matrix(1, 5), "shift_matrix with an odd d_model")
    must_raise_value_error(lambda: shift_matrix(1, 0), "shift_matrix with d_model = 0 (not a positive even integer)")


def test_module_adds_the_table_as_a_buffer():
    module = PositionalEncoding(8, max_seq_len=20)
    assert "pe" in dict(module.named_buffers()), (
        "the table is fixed, not learned: keep it as a buffer, register_buffer('pe', ...) (not an nn.Parameter, not "
        "a plain attribute), so it follows .to(device)"
    )
    assert not any(True for _ in module.parameters()), (
        "the encoding is fixed, not learned: the module must have no parameters"
    )
    x = torch.randn(2, 5, 8)
    try:
        out = module(x.clone())  # a copy: whether forward leaves its input alone is another test's question
    except RuntimeError as error:
        pytest.fail("forward must add the first seq rows of the table, pe[:seq] with seq = x.shape[1], to every "
                    f"sequence in the batch; the whole table, or rows picked by another size, does not fit ({error})")
    assert torch.allclose(out - x, get_positional_encoding(5, 8).expand(2, 5, 8), atol=1e-6), (
        "forward must add the first seq rows of the table to every sequence in the batch"
    )
    other_base = PositionalEncoding(8, max_seq_len=20, base=100.0)
    assert torch.allclose(other_base.pe, get_positional_encoding(20, 8, base=100.0)), (
        "the module's table is built with the base it is given: pass base on to get_positional_encoding"
    )


def test_module_leaves_its_input_unchanged():
    module = PositionalEncoding(8, max_seq_len=20)
    x = torch.randn(2, 5, 8)
    before = x.clone()
    module(x)
    assert torch.equal(x, before), (
        "forward must leave its input unchanged and return a new tensor: x + pe builds one, while x += pe "
        "overwrites the caller's embeddings (which they may still need, for a residual connection say)"
    )


def test_module_rejects_too_long_or_wrong_width_inputs():
    module = PositionalEncoding(8, max_seq_len=4)
    must_raise_value_error(lambda: module(torch.zeros(1, 5, 8)), "a sequence longer than max_seq_len")
    must_raise_value_error(lambda: module(torch.zeros(1, 3, 6)), "an input whose last dimension is not d_model")


def test_module_accepts_a_sequence_of_exactly_max_seq_len():
    module = PositionalEncoding(8, max_seq_len=4)
    try:
        out = module(torch.zeros(1, 4, 8))
    except ValueError as error:
        pytest.fail("a sequence of exactly max_seq_len positions fits the table (rows 0 .. max_seq_len - 1): refuse "
                    f"only a sequence longer than max_seq_len ({error})")
    assert torch.allclose(out[0], get_positional_encoding(4, 8), atol=1e-6), (
        "a sequence of exactly max_seq_len positions gets every row of the table added"
    )


def test_module_follows_its_device():
    module = PositionalEncoding(8, max_seq_len=10).to("meta")  # PyTorch's shape-only device: no GPU needed
    try:
        out = module(torch.empty(2, 6, 8, device="meta"))
    except RuntimeError as error:
        pytest.fail(f"after .to(device) forward must work on that device: a buffer follows module.to(device), a "
                    f"tensor built inside forward stays on the CPU; slice the buffer instead ({error})")
    assert out.device.type == "meta", "the output must be on the module's device"
