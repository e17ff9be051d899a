"""Public tests for attention.py: scaled dot-product attention and the multi-head module.

Each test checks one idea and its message names it; fix the scaled_dot_product_attention tests first, since
the module uses that function.
"""

import math

import pytest
import torch
from torch import nn

from checks import PROJECTIONS, must_raise, must_raise_value_error, projection_weights, torch_twin
from mha_pe import MultiHeadAttention, scaled_dot_product_attention


def test_attention_shapes():
    q, k, v = torch.randn(2, 4, 8), torch.randn(2, 6, 8), torch.randn(2, 6, 5)
    out, weights = scaled_dot_product_attention(q, k, v)
    assert tuple(out.shape) == (2, 4, 5), f"output is (..., seq_q, d_v): expected (2, 4, 5), got {tuple(out.shape)}"
    assert tuple(weights.shape) == (2, 4, 6), (
        f"weights are (..., seq_q, seq_k): expected (2, 4, 6), got {tuple(weights.shape)}"
    )


SOFTMAX = ("each query's weights must sum to 1: take the softmax over the last (key) dimension, of scores scaled "
           "before the softmax (not after)")


def test_weights_are_a_distribution_over_the_keys():
    _, weights = scaled_dot_product_attention(torch.randn(2, 4, 8), torch.randn(2, 6, 8), torch.randn(2, 6, 5))
    assert torch.allclose(weights.sum(-1), torch.ones(2, 4), atol=1e-5), SOFTMAX


@pytest.mark.parametrize("lead", [(), (3,), (2, 4)], ids=["no-batch", "batch", "batch-heads"])
def test_attention_accepts_any_number_of_leading_dimensions(lead):
    q, k, v = torch.randn(*lead, 4, 8), torch.randn(*lead, 6, 8), torch.randn(*lead, 6, 5)
    rule = ("attention accepts any number of leading dimensions: work on the last two axes only (transpose(-2, -1), "
            "softmax(dim=-1)), whatever comes before them, never on fixed axes such as transpose(2, 3)")
    try:
        out, weights = scaled_dot_product_attention(q, k, v)
    except (IndexError, RuntimeError) as error:
        pytest.fail(f"with leading dimensions {lead} attention failed ({type(error).__name__}: {error}): {rule}")
    assert tuple(out.shape) == (*lead, 4, 5) and tuple(weights.shape) == (*lead, 4, 6), (
        f"with leading dimensions {lead} the output must be {(*lead, 4, 5)} and the weights {(*lead, 4, 6)}, got "
        f"{tuple(out.shape)} and {tuple(weights.shape)}: {rule}"
    )


def test_attention_is_scaled_by_sqrt_of_the_feature_size():
    q, k, v = torch.randn(1, 3, 16), torch.randn(1, 3, 16), torch.randn(1, 3, 4)
    expected = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(16), dim=-1)
    out, weights = scaled_dot_product_attention(q.clone(), k.clone(), v)
    assert torch.allclose(weights.sum(-1), torch.ones(1, 3), atol=1e-5), SOFTMAX
    assert torch.allclose(weights, expected, atol=1e-5), (
        "weights must be softmax(q k^T / sqrt(d)) with d the size of each query vector (16 here; the values have 4 "
        "features): divide the scores by sqrt(d), scaled before the softmax"
    )
    assert torch.allclose(out, weights @ v, atol=1e-5), "the output is weights @ v"


def test_mask_blocks_keys():
    q, k, v = torch.randn(1, 3, 4), torch.randn(1, 3, 4), torch.randn(1, 3, 4)
    # Copies of q, k, v for each call: whether attention leaves its inputs alone is another test's question.
    _, unmasked = scaled_dot_product_attention(q.clone(), k.clone(), v.clone())
    assert torch.allclose(unmasked.sum(-1), torch.ones(1, 3), atol=1e-5), SOFTMAX
    causal = torch.tril(torch.ones(3, 3, dtype=torch.bool))
    try:
        _, weights = scaled_dot_product_attention(q.clone(), k.clone(), v.clone(), mask=causal)
    except (IndexError, RuntimeError) as error:
        raise AssertionError("a (seq_q, seq_k) mask applies to every batch element: use it where it broadcasts "
                             f"against the (batch, seq_q, seq_k) scores, as masked_fill does ({error})") from None
    assert torch.all(weights[0][~causal] == 0), (
        "where the mask is False the weight must be exactly 0 (True = may attend)"
    )
    assert torch.allclose(weights.sum(-1), torch.ones(1, 3), atol=1e-5), (
        "masked rows must still sum to 1: fill the blocked scores with -inf before the softmax, not the weights after"
    )
    kept = unmasked * causal
    assert torch.allclose(weights, kept / kept.sum(-1, keepdim=True), atol=1e-5), (
        "with a mask each query attends as without it, over the allowed keys only: compute the same scaled scores "
        "(q k^T / sqrt(d)), then fill the blocked ones with -inf before the softmax"
    )


# One account of the all-blocked row, the docstring's: the symptom each common fill gives, and the fix.
ALL_BLOCKED = ("a query with every key blocked attends to nothing: its row of weights and its output are all zeros "
               "(filling the blocked scores with -inf makes that row NaN, with -1e9 equal weights; set the rows where "
               "mask.any(dim=-1) is False to zeros)")


def test_a_query_with_every_key_blocked_attends_to_nothing():
    q, k, v = torch.randn(1, 3, 4), torch.randn(1, 3, 4), torch.randn(1, 3, 4)
    mask = torch.tensor([[True, False, True], [False, False, False], [True, True, True]])  # query 1 sees no key
    out, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    assert not (weights.isnan().any() or out.isnan().any()), (
        f"{ALL_BLOCKED}; this row is NaN, what a softmax over a row of -inf scores gives"
    )
    assert torch.all(weights[0, 1] == 0) and torch.all(out[0, 1] == 0), (
        f"{ALL_BLOCKED}; this row's weights are " + ("equal (1/seq_k each), what a softmax over a row of -1e9 scores "
                                                     "gives" if torch.allclose(weights[0, 1], torch.full((3,), 1 / 3))
                                                     else "not all zero")
    )
    assert torch.allclose(weights[0, [0, 2]].sum(-1), torch.ones(2), atol=1e-5), (
        "the other queries keep their weights, each row summing to 1 over its allowed keys"
    )
    per_sequence = torch.stack((mask, mask.roll(1, 0)))  # a 3-D mask: sequence 1's query 2 sees no key
    out, weights = scaled_dot_product_attention(q.expand(2, 3, 4), k.expand(2, 3, 4), v.expand(2, 3, 4),
                                                mask=per_sequence)
    assert not (weights.isnan().any() or out.isnan().any()), (
        "a query with every key blocked attends to nothing, whatever the mask's rank: with a 3-D mask too, look "
        "for a key left along the last axis, mask.any(dim=-1, keepdim=True)"
    )
    assert torch.all(weights[1, 2] == 0) and torch.all(out[1, 2] == 0), (
        "a query with every key blocked attends to nothing: with a 3-D mask too its row of weights and its "
        "output must be all zeros"
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=["float", "int"])
def test_attention_refuses_a_mask_that_is_not_boolean(dtype):
    q = torch.randn(1, 3, 4)
    mask = torch.tril(torch.ones(3, 3)).to(dtype)
    must_raise(TypeError, lambda: scaled_dot_product_attention(q, q, q, mask=mask),
               f"a {dtype} mask is ambiguous (1 = may attend, or a score to add?): attention with a mask that is not "
               "torch.bool")


def test_attention_leaves_its_inputs_unchanged():
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 2)
    mask = torch.rand(3, 5) > 0.3
    copies = [t.clone() for t in (q, k, v, mask)]
    scaled_dot_product_attention(q, k, v, mask=mask)
    assert all(torch.equal(t, copy) for t, copy in zip((q, k, v, mask), copies)), (
        "attention must leave q, k, v and the mask unchanged: scale with q * scale or q / sqrt(d), which make new "
        "tensors, not q /= sqrt(d) or q.mul_(...), which overwrite the caller's tensors"
    )


def test_large_scores_stay_finite():
    q, k, v = torch.randn(1, 3, 4) * 100, torch.randn(1, 3, 4) * 100, torch.randn(1, 3, 2)
    out, weights = scaled_dot_product_attention(q, k, v)
    assert torch.isfinite(weights).all() and torch.isfinite(out).all(), (
        "use a numerically stable softmax (torch.softmax subtracts each row's maximum): exp of large scores "
        "overflows to inf, and inf / inf is nan"
    )
    far_apart = torch.tensor([[[40.0, 0.0], [0.0, 0.0], [-40.0, 0.0]]])  # row scores near +1100, 0 and -1100
    out, weights = scaled_dot_product_attention(far_apart, torch.full((1, 3, 2), 40.0), torch.randn(1, 3, 2))
    assert torch.isfinite(weights).all() and torch.isfinite(out).all(), (
        "subtract each row's maximum, not one maximum for all rows: a row far below the largest score "
        "underflows to 0 / 0 = nan (torch.softmax(scores, dim=-1) does it right)"
    )


def test_module_layers_and_output_shape():
    mha = MultiHeadAttention(16, 4)
    assert mha.num_heads == 4 and mha.head_dim == 4, "store num_heads and head_dim = d_model // num_heads"
    for name in PROJECTIONS:
        layer = getattr(mha, name, None)
        assert isinstance(layer, nn.Linear) and layer.in_features == layer.out_features == 16, (
            f"{name} must be an nn.Linear(d_model, d_model)"
        )
        assert layer.bias is not None, f"{name} must have a bias (nn.Linear's default, bias=True)"
    out = mha(torch.randn(2, 5, 16))
    assert tuple(out.shape) == (2, 5, 16), (
        f"self-attention keeps the input shape (batch, seq, d_model), got {tuple(out.shape)}"
    )


def test_module_returns_per_head_weights():
    out, weights = MultiHeadAttention(16, 4)(torch.randn(2, 5, 16), return_weights=True)
    assert tuple(weights.shape) == (2, 4, 5, 5), (
        "with return_weights=True return per-head weights, (batch, num_heads, seq, seq), not their average; "
        f"got {tuple(weights.shape)}"
    )


def test_module_matches_torch_multihead_attention():
    d_model, num_heads = 16, 4
    mha = MultiHeadAttention(d_model, num_heads)
    twin = torch_twin(projection_weights(mha), d_model, num_heads)
    x = torch.randn(2, 5, d_model)
    out, weights = mha(x, return_weights=True)
    ref_out, ref_weights = twin(x, x, x, average_attn_weights=False)
    assert weights.shape == ref_weights.shape and torch.allclose(weights, ref_weights, atol=1e-5), (
        "per-head weights differ from nn.MultiheadAttention with the same weights: project q, k and v with their "
        "own layers, split into contiguous heads, scale each head's scores by sqrt(head_dim), softmax over keys "
        "(fix the heads and scaled_dot_product_attention tests first: the module uses them)"
    )
    assert torch.allclose(out, ref_out, atol=1e-5), (
        "outputs differ from nn.MultiheadAttention with the same weights: concatenate the heads in order, then "
        "apply out_proj (fix the heads and scaled_dot_product_attention tests first: the module uses them)"
    )


def test_module_mask_reaches_every_head():
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(1, 4, 8)
    causal = torch.tril(torch.ones(4, 4, dtype=torch.bool))
    _, masked = mha(x, mask=causal, return_weights=True)
    _, unmasked = mha(x, return_weights=True)
    # Weights that are no distribution at all are the softmax's mistake, not the mask's: said first.
    assert torch.allclose(unmasked.sum(-1), torch.ones(unmasked.shape[:-1]), atol=1e-5), SOFTMAX
    assert torch.all(masked[..., ~causal] == 0), (
        "a (seq, seq) mask must reach every head and batch element: blocked keys (False; True = may attend) get "
        "weight 0 in every head"
    )
    if masked.shape == unmasked.shape == (1, 2, 4, 4):  # per head: the same weights, the blocked keys removed
        kept = unmasked * causal
        renormalised = [kept * unmasked.sum(axis, keepdim=True) / kept.sum(axis, keepdim=True) for axis in (-1, -2)]
        assert any(torch.allclose(masked, expected, atol=1e-5) for expected in renormalised), (
            "with a mask each head attends as without it, over the allowed keys only (True = may attend)"
        )


def test_gradients_reach_every_projection():
    mha = MultiHeadAttention(8, 2)
    mha(torch.randn(2, 4, 8)).pow(2).sum().backward()
    for name in PROJECTIONS:
        grad = getattr(mha, name).weight.grad
        assert grad is not None and grad.abs().sum() > 0, (
            f"no gradient reaches {name}: every projection is on the path from input to output (nothing detached, "
            "no torch.no_grad), so training updates all four"
        )


def test_module_is_deterministic():
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(2, 4, 8)
    for mode in ("train", "eval"):
        getattr(mha, mode)()
        assert torch.equal(mha(x), mha(x)), (
            f"in {mode} mode the module must give the same output twice for the same input: nothing in it is random "
            "(no dropout left on: F.dropout drops even in eval mode unless given training=self.training)"
        )


def test_module_refuses_a_2d_input():
    mha = MultiHeadAttention(8, 2)
    must_raise_value_error(lambda: mha(torch.randn(5, 8)),
                           "MultiHeadAttention with a 2-D input (x must be exactly 3-D, (batch, seq, d_model); for "
                           "one sequence pass x[None])")


def test_module_rejects_indivisible_width():
    must_raise_value_error(lambda: MultiHeadAttention(10, 4),
                           "MultiHeadAttention with a d_model that num_heads does not divide")
    must_raise_value_error(lambda: MultiHeadAttention(10, 0),
                           "MultiHeadAttention with no heads (zero heads divide nothing)")
