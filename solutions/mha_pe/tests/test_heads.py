"""Public tests for heads.py: split and combine are reshapes into contiguous per-head chunks."""

import pytest
import torch

from checks import must_raise_value_error
from mha_pe import combine_heads, split_heads


def test_split_shape():
    try:
        out = split_heads(torch.randn(2, 5, 12), num_heads=4)
    except TypeError as error:
        pytest.fail("each head has head_dim = d_model // num_heads features, an int: the integer division //, since "
                    f"view, reshape and unflatten refuse a float size such as d_model / num_heads ({error})")
    assert tuple(out.shape) == (2, 4, 5, 3), (
        f"(batch, seq, d_model) splits into (batch, num_heads, seq, d_model // num_heads): expected (2, 4, 5, 3), "
        f"got {tuple(out.shape)}"
    )


def test_each_head_is_a_contiguous_chunk_of_features():
    x = torch.arange(12.0).reshape(1, 1, 12)
    out = split_heads(x, num_heads=4)
    assert out[0, :, 0].tolist() == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11]], (
        "head h must hold features h*head_dim .. (h+1)*head_dim - 1 of the projected vector (contiguous chunks), "
        f"got {out[0, :, 0].tolist()}"
    )


def test_heads_keep_tokens_apart():
    # x[b, s, f] = 100 * s + f: every value says which token it came from (value // 100).
    x = (100 * torch.arange(5.0)[None, :, None] + torch.arange(12.0)).expand(2, 5, 12)
    out = split_heads(x, num_heads=3)
    tokens = torch.div(out, 100, rounding_mode="floor")
    assert tuple(out.shape) == (2, 3, 5, 4) and bool((tokens == torch.arange(5.0)[:, None]).all()), (
        "out[b, h, s] must come from token s only: split the feature axis first, then move the head axis in front "
        "of the sequence axis; a view straight to (batch, heads, seq, head_dim) mixes features of different tokens"
    )


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_combine_puts_each_head_back_in_order(layout):
    # (batch, heads, seq, head_dim) as attention returns it (contiguous), or as a transpose leaves it.
    heads = torch.randn(2, 3, 5, 4) if layout == "contiguous" else torch.randn(2, 5, 3, 4).transpose(1, 2)
    try:
        out = combine_heads(heads)
    except RuntimeError as error:
        pytest.fail("combine_heads must accept any (batch, heads, seq, head_dim) tensor: once the head axis is moved "
                    "back the tensor is no longer contiguous in memory, which .view() refuses; use reshape, or "
                    f".contiguous() before .view() ({error})")
    assert tuple(out.shape) == (2, 5, 12), (
        f"combine_heads must return (batch, seq, heads*head_dim), got {tuple(out.shape)}"
    )
    for h in range(3):
        assert torch.equal(out[:, :, 4 * h:4 * (h + 1)], heads[:, h]), (
            "combine_heads is the inverse of split_heads: head h's features go to positions "
            "h*head_dim .. (h+1)*head_dim - 1 of each token, glued side by side in order"
        )


def test_split_rejects_indivisible_width_and_wrong_rank():
    must_raise_value_error(lambda: split_heads(torch.randn(2, 5, 10), num_heads=4),
                           "split_heads with a d_model that num_heads does not divide")
    must_raise_value_error(lambda: split_heads(torch.randn(2, 5, 12), num_heads=0),
                           "split_heads with no heads (zero heads divide nothing)")
    must_raise_value_error(lambda: split_heads(torch.randn(5, 12), num_heads=4), "split_heads with a 2-D input")
    must_raise_value_error(lambda: split_heads(torch.randn(2, 3, 5, 12), num_heads=4),
                           "split_heads with a 4-D input (x must be exactly 3-D)")
    must_raise_value_error(lambda: combine_heads(torch.randn(2, 5, 12)), "combine_heads with a 3-D input")


def test_split_and_combine_keep_the_dtype_and_the_device():
    x = torch.randn(2, 3, 8, dtype=torch.float64)
    split = split_heads(x, 2)
    assert split.dtype == torch.float64 and combine_heads(split).dtype == torch.float64, (
        "split_heads and combine_heads only rearrange their input, so they keep its dtype: float64 stays float64"
    )
    try:
        on_meta = combine_heads(split_heads(torch.empty(2, 3, 8, device="meta"), 2))  # a shape-only device
    except (RuntimeError, NotImplementedError) as error:
        pytest.fail("split_heads and combine_heads only rearrange their input, so they work on any device: build no "
                    f"new tensor on a fixed device (tried on PyTorch's meta device) ({error})")
    assert on_meta.device.type == "meta", "split_heads and combine_heads keep their input's device"
