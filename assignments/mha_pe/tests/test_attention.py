"""Public tests for attention.py: scaled dot-product attention and the multi-head module."""

import math

import pytest
import torch
from torch import nn

from mha_pe import MultiHeadAttention, scaled_dot_product_attention


def torch_twin(module, d_model, num_heads):
    """PyTorch's own multi-head attention carrying the same weights as ``module``."""
    twin = nn.MultiheadAttention(d_model, num_heads, batch_first=True)
    with torch.no_grad():
        twin.in_proj_weight.copy_(torch.cat([module.q_linear.weight, module.k_linear.weight, module.v_linear.weight]))
        twin.in_proj_bias.copy_(torch.cat([module.q_linear.bias, module.k_linear.bias, module.v_linear.bias]))
        twin.out_proj.weight.copy_(module.out_proj.weight)
        twin.out_proj.bias.copy_(module.out_proj.bias)
    return twin


def test_attention_shapes_and_rows_sum_to_one():
    q, k, v = torch.randn(2, 4, 8), torch.randn(2, 6, 8), torch.randn(2, 6, 5)
    out, weights = scaled_dot_product_attention(q, k, v)
    assert tuple(out.shape) == (2, 4, 5), f"output is (..., seq_q, d_v): expected (2, 4, 5), got {tuple(out.shape)}"
    assert tuple(weights.shape) == (2, 4, 6), (
        f"weights are (..., seq_q, seq_k): expected (2, 4, 6), got {tuple(weights.shape)}"
    )
    assert torch.allclose(weights.sum(-1), torch.ones(2, 4), atol=1e-5), (
        "each query's weights must sum to 1: take the softmax over the last (key) dimension"
    )


@pytest.mark.parametrize("lead", [(), (3,), (2, 4)], ids=["no-batch", "batch", "batch-heads"])
def test_attention_accepts_any_number_of_leading_dimensions(lead):
    q, k, v = torch.randn(*lead, 4, 8), torch.randn(*lead, 6, 8), torch.randn(*lead, 6, 5)
    out, weights = scaled_dot_product_attention(q, k, v)
    assert tuple(out.shape) == (*lead, 4, 5) and tuple(weights.shape) == (*lead, 4, 6), (
        f"with leading dimensions {lead} the output must be {(*lead, 4, 5)} and the weights {(*lead, 4, 6)}, got "
        f"{tuple(out.shape)} and {tuple(weights.shape)}: work on the last two axes only (transpose(-2, -1), "
        "softmax(dim=-1)), whatever comes before them"
    )


def test_attention_is_scaled_by_sqrt_of_the_feature_size():
    q, k, v = torch.randn(1, 3, 16), torch.randn(1, 3, 16), torch.randn(1, 3, 4)
    _, weights = scaled_dot_product_attention(q, k, v)
    expected = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(16), dim=-1)
    assert torch.allclose(weights, expected, atol=1e-5), (
        "weights must be softmax(q k^T / sqrt(d)) with d the size of each query vector; divide the scores before "
        "the softmax, not after"
    )


def test_mask_blocks_keys():
    q, k, v = torch.randn(1, 3, 4), torch.randn(1, 3, 4), torch.randn(1, 3, 4)
    causal = torch.tril(torch.ones(3, 3, dtype=torch.bool))
    _, weights = scaled_dot_product_attention(q, k, v, mask=causal)
    assert torch.all(weights[0][~causal] == 0), (
        "where the mask is False the weight must be exactly 0 (True = may attend)"
    )
    assert torch.allclose(weights.sum(-1), torch.ones(1, 3), atol=1e-5), "masked rows must still sum to 1"


def test_module_layers_and_output_shape():
    mha = MultiHeadAttention(16, 4)
    assert mha.num_heads == 4 and mha.head_dim == 4, "store num_heads and head_dim = d_model // num_heads"
    for name in ("q_linear", "k_linear", "v_linear", "out_proj"):
        layer = getattr(mha, name, None)
        assert isinstance(layer, nn.Linear) and layer.in_features == layer.out_features == 16, (
            f"{name} must be an nn.Linear(d_model, d_model)"
        )
    out = mha(torch.randn(2, 5, 16))
    assert tuple(out.shape) == (2, 5, 16), (
        f"self-attention keeps the input shape (batch, seq, d_model), got {tuple(out.shape)}"
    )


def test_module_returns_per_head_weights():
    out, weights = MultiHeadAttention(16, 4)(torch.randn(2, 5, 16), return_weights=True)
    assert tuple(weights.shape) == (2, 4, 5, 5), (
        f"with return_weights=True the weights are per head, (batch, num_heads, seq, seq); got {tuple(weights.shape)}"
    )


def test_module_matches_torch_multihead_attention():
    d_model, num_heads = 16, 4
    mha = MultiHeadAttention(d_model, num_heads)
    twin = torch_twin(mha, d_model, num_heads)
    x = torch.randn(2, 5, d_model)
    out, weights = mha(x, return_weights=True)
    ref_out, ref_weights = twin(x, x, x, average_attn_weights=False)
    assert torch.allclose(weights, ref_weights, atol=1e-5), (
        "per-head weights differ from nn.MultiheadAttention with the same weights: project with q/k/v_linear, split "
        "into contiguous heads, scale by sqrt(head_dim)"
    )
    assert torch.allclose(out, ref_out, atol=1e-5), (
        "outputs differ from nn.MultiheadAttention with the same weights: "
        "concatenate the heads in order, then apply out_proj"
    )


def test_module_mask_matches_torch():
    d_model, num_heads = 8, 2
    mha = MultiHeadAttention(d_model, num_heads)
    twin = torch_twin(mha, d_model, num_heads)
    x = torch.randn(1, 4, d_model)
    causal = torch.tril(torch.ones(4, 4, dtype=torch.bool))
    ref_out, _ = twin(x, x, x, attn_mask=~causal)  # PyTorch's module marks the blocked keys instead
    assert torch.allclose(mha(x, mask=causal), ref_out, atol=1e-5), (
        "a (seq, seq) mask must apply to every head and batch element, True = may attend"
    )


def test_module_rejects_indivisible_width():
    with pytest.raises(ValueError):
        MultiHeadAttention(10, 4)
