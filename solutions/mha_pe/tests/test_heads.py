"""Public tests for heads.py: split and combine are reshapes into contiguous per-head chunks."""

import pytest
import torch

from mha_pe import combine_heads, split_heads


def test_split_shape():
    out = split_heads(torch.randn(2, 5, 12), num_heads=4)
    assert tuple(out.shape) == (2, 4, 5, 3), (
        f"(batch, seq, d_model) splits into (batch, num_heads, seq, d_model // num_heads): expected (2, 4, 5, 3), "
        f"got {tuple(out.shape)}"
    )


def test_each_head_is_a_contiguous_chunk_of_features():
    x = torch.arange(12.0).reshape(1, 1, 12)
    out = split_heads(x, num_heads=4)
    assert out[0, :, 0].tolist() == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11]], (
        "head h must hold features h*head_dim .. (h+1)*head_dim - 1 of the projected vector (contiguous chunks), "
        f"got {out[0, :, 0].tolist()}: reshape the feature axis, then move the head axis; do not reshape across seq"
    )


def test_heads_keep_tokens_apart():
    x = torch.randn(1, 3, 8)
    out = split_heads(x, num_heads=2)
    assert torch.equal(out[0, 1, 2], x[0, 2, 4:]), (
        "out[b, h, s] must come from token s only: a view straight to (batch, heads, seq, head_dim) without a "
        "transpose mixes features of different tokens"
    )


def test_combine_is_the_inverse_of_split():
    x = torch.randn(2, 5, 12)
    heads = split_heads(x, num_heads=3)
    back = combine_heads(heads)
    assert tuple(back.shape) == (2, 5, 12), (
        f"combine_heads must return (batch, seq, heads*head_dim), got {tuple(back.shape)}"
    )
    assert torch.equal(back, x), (
        "combine_heads(split_heads(x, n)) must give back x exactly: glue the heads side by side in order"
    )


def test_split_rejects_indivisible_width_and_wrong_rank():
    with pytest.raises(ValueError):
        split_heads(torch.randn(2, 5, 10), num_heads=4)
    with pytest.raises(ValueError):
        split_heads(torch.randn(5, 12), num_heads=4)
    with pytest.raises(ValueError):
        combine_heads(torch.randn(2, 5, 12))
