"""Hidden tests: scaled dot-product attention and the MultiHeadAttention module."""

import torch

from autograder.rubric import graded
from autograder.hidden_tests.support import close, each_case, module_and_twin, pair, randn, student_raises, tensor

GROUP = "attention"


@graded(2, "Attention returns (output, weights): output (..., seq_q, d_v) and weights (..., seq_q, seq_k), "
           "for any number of leading batch dimensions.")
@each_case(lead=[(), (1,), (3,), (2, 1), (1, 3), (3, 2)], seq_q=range(1, 6), seq_k=range(1, 6), d=range(1, 7),
           d_v=range(1, 7))
def test_attention_shapes(student, lead, seq_q, seq_k, d, d_v):
    """scaled_dot_product_attention returns output and weights of the right shapes"""
    q, k, v = torch.zeros(*lead, seq_q, d), torch.zeros(*lead, seq_k, d), torch.zeros(*lead, seq_k, d_v)
    out, weights = pair(student.scaled_dot_product_attention(q, k, v))
    tensor(out, (*lead, seq_q, d_v))
    tensor(weights, (*lead, seq_q, seq_k))


@graded(4, "weights = softmax(q k^T / sqrt(d)) with d the size of one query vector, scaled before the "
           "softmax; output = weights @ v.", visibility="hidden")
def test_attention_values(student, reference):
    """Attention computes softmax(q k^T / sqrt(d)) v"""
    q, k, v = randn(2, 3, 4, 8, seed=4), randn(2, 3, 6, 8, seed=5), randn(2, 3, 6, 5, seed=6)
    out, weights = pair(student.scaled_dot_product_attention(q, k, v))
    ref_out, ref_weights = reference.scaled_dot_product_attention(q, k, v)
    close(weights, ref_weights)
    close(out, ref_out)


@graded(2, "Each query's weights are a probability distribution over the keys: take the softmax over the "
           "last (key) dimension.")
def test_attention_rows_sum_to_one(student):
    """Each query's weights sum to 1 over the keys"""
    _, weights = pair(student.scaled_dot_product_attention(randn(2, 4, 3, seed=7), randn(2, 6, 3, seed=8),
                                                           randn(2, 6, 2, seed=9)))
    close(tensor(weights, (2, 4, 6)).sum(-1), torch.ones(2, 4))


@graded(3, "The mask says where a query may look (True = may attend): blocked keys get weight exactly 0, "
           "which filling their scores with -inf before the softmax achieves; a (seq_q, seq_k) mask applies to "
           "every batch element.")
def test_attention_mask(student, reference):
    """Masked keys get zero weight and the mask broadcasts"""
    q, k, v = randn(2, 4, 4, seed=10), randn(2, 4, 4, seed=11), randn(2, 4, 3, seed=12)
    causal = torch.tril(torch.ones(4, 4, dtype=torch.bool))
    padding = torch.tensor([True, True, True, False]).reshape(1, 1, 4)
    for mask in (causal, padding):
        out, weights = pair(student.scaled_dot_product_attention(q, k, v, mask=mask))
        ref_out, ref_weights = reference.scaled_dot_product_attention(q, k, v, mask=mask)
        close(weights, ref_weights)
        close(out, ref_out)


@graded(2, "Use a numerically stable softmax (torch.softmax subtracts each row's maximum): exponentiating "
           "raw large scores overflows to inf and nan.", visibility="hidden")
def test_attention_is_stable_on_large_scores(student, reference):
    """Large scores give finite, correct weights"""
    q, k, v = randn(1, 3, 4, seed=13) * 300, randn(1, 3, 4, seed=14) * 300, randn(1, 3, 2, seed=15)
    out, weights = pair(student.scaled_dot_product_attention(q, k, v))
    ref_out, ref_weights = reference.scaled_dot_product_attention(q, k, v)
    close(weights, ref_weights, atol=1e-4)
    close(out, ref_out, atol=1e-4)


@graded(3, "MultiHeadAttention has four nn.Linear(d_model, d_model) layers named q_linear, k_linear, v_linear "
           "and out_proj, and attributes num_heads and head_dim = d_model // num_heads.")
def test_module_layers(student):
    """MultiHeadAttention has the four projections and the head sizes"""
    module = student.MultiHeadAttention(12, 3)
    info = module.describe()
    assert isinstance(info, dict) and info.get("is_module"), "not an nn.Module"
    for name in ("q_linear", "k_linear", "v_linear", "out_proj"):
        child = info["children"].get(name)
        assert child and child["linear"] and child["in_features"] == child["out_features"] == 12, name
        assert child["bias"], f"{name} has no bias"
    assert module.attr("num_heads") == 3 and module.attr("head_dim") == 4, "num_heads / head_dim"


@graded(3, "Self-attention keeps the shape (batch, seq, d_model); with return_weights=True it also returns "
           "per-head weights (batch, num_heads, seq, seq). Any sizes work, including batch 1, sequence "
           "length 1, one head and head_dim 1.")
@each_case(batch=range(1, 4), seq=range(1, 6), heads=range(1, 5), head_dim=range(1, 4))
def test_module_shapes(student, batch, seq, heads, head_dim):
    """MultiHeadAttention returns the right shapes"""
    d_model = heads * head_dim
    module = student.MultiHeadAttention(d_model, heads)
    x = randn(batch, seq, d_model, seed=16)
    tensor(module(x), (batch, seq, d_model))
    out, weights = pair(module(x, return_weights=True))
    tensor(out, (batch, seq, d_model))
    tensor(weights, (batch, heads, seq, seq))


@graded(5, "With the same weights the module must agree with torch.nn.MultiheadAttention: project q, k and v "
           "with their own layers, split into contiguous heads, attend with scale 1/sqrt(head_dim) inside each "
           "head, concatenate the heads in order and apply out_proj.", visibility="hidden")
def test_module_matches_torch_output(student):
    """The output agrees with torch.nn.MultiheadAttention given the same weights"""
    for d_model, heads, seq in ((16, 4, 6), (12, 3, 1), (8, 1, 5)):
        module, twin = module_and_twin(student, d_model, heads)
        x = randn(2, seq, d_model, seed=17)
        with torch.no_grad():
            expected, _ = twin(x, x, x, need_weights=False)
        close(module(x), expected)


@graded(4, "Each head's attention weights must agree with torch.nn.MultiheadAttention's per-head weights: "
           "scores between the head's own query and key chunks, scaled by sqrt(head_dim), softmax over keys.",
        visibility="hidden")
def test_module_matches_torch_weights(student):
    """Per-head weights agree with torch.nn.MultiheadAttention"""
    module, twin = module_and_twin(student, 16, 4)
    x = randn(2, 5, 16, seed=18)
    with torch.no_grad():
        _, expected = twin(x, x, x, average_attn_weights=False)
    _, weights = pair(module(x, return_weights=True))
    close(weights, expected)


@graded(3, "The mask reaches every head: a (seq, seq) boolean mask (True = may attend) applies to all heads "
           "and batch elements, as torch.nn.MultiheadAttention applies its inverted attn_mask.",
        visibility="hidden")
def test_module_mask(student):
    """A causal mask gives the same result as torch's"""
    module, twin = module_and_twin(student, 8, 2)
    x = randn(2, 5, 8, seed=19)
    causal = torch.tril(torch.ones(5, 5, dtype=torch.bool))
    with torch.no_grad():
        expected, _ = twin(x, x, x, attn_mask=~causal, need_weights=False)
    close(module(x, mask=causal), expected)


@graded(3, "Every projection is on the path from input to output (q, k and v through attention, out_proj "
           "after the heads are combined), so training updates all four.", visibility="hidden")
def test_gradients_reach_every_projection(student):
    """Gradients reach all four projections"""
    grads = student.MultiHeadAttention(8, 2).grads(randn(2, 4, 8, seed=20))
    assert isinstance(grads, dict), "no gradients"
    for name in ("q_linear.weight", "k_linear.weight", "v_linear.weight", "out_proj.weight"):
        assert isinstance(grads.get(name), float) and grads[name] > 0, f"no gradient for {name}"


@graded(2, "Sequences in a batch do not see each other: each one's output is what it would be alone.",
        visibility="hidden")
def test_batch_elements_are_independent(student):
    """Each batch element's output is independent of the others"""
    module = student.MultiHeadAttention(8, 2)
    x = randn(3, 4, 8, seed=21)
    together = tensor(module(x), (3, 4, 8))
    close(together[1:2], module(x[1:2]))


@graded(2, "MultiHeadAttention raises ValueError when d_model is not divisible by num_heads: heads must split "
           "the width evenly.")
def test_indivisible_width_raises_value_error(student):
    """An indivisible d_model raises ValueError"""
    with student_raises("ValueError"):
        student.MultiHeadAttention(10, 4)
