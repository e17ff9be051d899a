"""Public tests for positional_encoding.py: shapes, a few exact values, the shift identity."""

import math

import pytest
import torch

from mha_pe import PositionalEncoding, get_positional_encoding, shift_matrix


def formula(pos, dim, d_model, base=10000.0):
    """One entry of the table, straight from the definition (pair index i = dim // 2)."""
    angle = pos / base ** (2 * (dim // 2) / d_model)
    return math.sin(angle) if dim % 2 == 0 else math.cos(angle)


def test_table_shape_and_dtype():
    pe = get_positional_encoding(10, 16)
    assert tuple(pe.shape) == (10, 16), (
        f"the table has one row per position and one column per feature: expected (10, 16), got {tuple(pe.shape)}"
    )
    assert pe.dtype == torch.float32, f"the table should be float32 like the embeddings it is added to, got {pe.dtype}"


def test_position_zero_is_sin0_cos0():
    pe = get_positional_encoding(4, 8)
    expected = torch.tensor([0.0, 1.0] * 4)
    assert torch.allclose(pe[0], expected, atol=1e-6), (
        "at position 0 every angle is 0, so even columns (sine) must be 0 and odd columns (cosine) 1; "
        f"got {pe[0].tolist()}. Positions start at 0."
    )


def test_first_pair_is_sin_and_cos_of_the_position():
    pe = get_positional_encoding(6, 8)
    pos = torch.arange(6, dtype=torch.float32)
    first_pair = torch.stack((torch.sin(pos), torch.cos(pos)), dim=1)
    assert torch.allclose(pe[:, :2], first_pair, atol=1e-5), (
        "the first feature pair has frequency 1 (exponent 0 whatever the base): column 0 must be sin(pos) and "
        "column 1 cos(pos); check that sine sits in the even column and cosine in the odd one"
    )


def test_values_match_the_formula():
    d_model = 6
    pe = get_positional_encoding(5, d_model)
    expected = torch.tensor([[formula(p, j, d_model) for j in range(d_model)] for p in range(5)])
    assert torch.allclose(pe, expected, atol=1e-5), (
        "values differ from PE[pos, 2i] = sin(pos / 10000**(2i/d_model)), PE[pos, 2i+1] = cos(same angle): "
        "check the exponent uses the pair index 2i (not the column index) and that columns interleave sin, cos"
    )


def test_base_changes_the_slow_frequencies():
    slow, fast = get_positional_encoding(5, 4, base=10000.0), get_positional_encoding(5, 4, base=100.0)
    assert torch.allclose(fast[:, 2], torch.tensor([formula(p, 2, 4, base=100.0) for p in range(5)]), atol=1e-5), (
        "the base argument sets how slowly the later pairs turn: with base=100 and d_model=4, "
        "column 2 must be sin(pos / 100**(2/4))"
    )
    assert torch.allclose(slow[:, :2], fast[:, :2], atol=1e-6), (
        "the first pair has exponent 0, so base must not change it"
    )


@pytest.mark.parametrize("args", [(0, 8), (5, 7), (5, 0), (5, -2)])
def test_bad_sizes_raise_value_error(args):
    with pytest.raises(ValueError):
        get_positional_encoding(*args)


@pytest.mark.parametrize("k", [1, 3, -2])
def test_shift_matrix_moves_the_encoding_by_k(k):
    d_model, n = 8, 12
    pe = get_positional_encoding(n, d_model)
    m = shift_matrix(k, d_model)
    assert tuple(m.shape) == (d_model, d_model), f"the shift matrix is (d_model, d_model), got {tuple(m.shape)}"
    src = torch.arange(max(0, -k), min(n, n - k))
    moved = pe[src] @ m.T  # row-wise M @ PE[pos]
    shifted = f"pos {'-' if k < 0 else '+'} {abs(k)}"  # PE[pos - 2], not PE[pos + -2]
    assert torch.allclose(moved, pe[src + k], atol=1e-5), (
        f"shift_matrix({k}) @ PE[pos] must equal PE[{shifted}] at every position: each (sin, cos) pair is turned by "
        "the fixed angle k * frequency, so M is block diagonal with one 2x2 rotation per pair (expand sin(a+b) and "
        "cos(a+b))"
    )


def test_module_adds_the_table_as_a_buffer():
    module = PositionalEncoding(8, max_seq_len=20)
    assert "pe" in dict(module.named_buffers()), (
        "keep the table with register_buffer('pe', ...) so it follows .to(device)"
    )
    assert not any(True for _ in module.parameters()), (
        "the encoding is fixed, not learned: the module must have no parameters"
    )
    x = torch.randn(2, 5, 8)
    out = module(x)
    assert torch.allclose(out - x, get_positional_encoding(5, 8).expand(2, 5, 8), atol=1e-6), (
        "forward must add the first seq rows of the table to every sequence in the batch"
    )


def test_module_rejects_too_long_or_wrong_width_inputs():
    module = PositionalEncoding(8, max_seq_len=4)
    with pytest.raises(ValueError):
        module(torch.zeros(1, 5, 8))  # longer than max_seq_len
    with pytest.raises(ValueError):
        module(torch.zeros(1, 3, 6))  # wrong d_model
