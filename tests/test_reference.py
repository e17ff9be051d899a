"""The reference solutions meet the contract, reproduce the lesson's numbers, and stay vectorized."""

import ast
import math

import pytest
import torch
import torch.nn.functional as F

from lesson import CONTRACT, LESSON
from autograder.lessons.mha_pe.public_checks import load_public_checks


def test_article_experiment_reproduces_the_published_weights(reference):
    """The lesson's charge / exceeded / refund experiment (seed 0, d_model 8), reported to 3 decimals."""
    torch.manual_seed(0)
    d_model = 8
    embeddings = {word: torch.randn(d_model) for word in ("charge", "exceeded", "refund")}
    pe = reference.get_positional_encoding(3, d_model)

    def from_middle(words, add_pe):
        x = torch.stack([embeddings[w] for w in words]) + (pe if add_pe else 0)
        weights = F.softmax(x @ x.T / math.sqrt(d_model), dim=-1)[1]
        return {w: round(weights[i].item(), 3) for i, w in enumerate(words) if w != "exceeded"}

    a, b = ["charge", "exceeded", "refund"], ["refund", "exceeded", "charge"]
    assert from_middle(a, False) == from_middle(b, False) == {"charge": 0.126, "refund": 0.208}
    assert from_middle(a, True) == {"charge": 0.147, "refund": 0.185}
    assert from_middle(b, True) == {"charge": 0.136, "refund": 0.2}


@pytest.mark.parametrize("max_seq_len, d_model, base",
                         [(1, 2, 10000.0), (7, 6, 10000.0), (5000, 512, 10000.0), (64, 32, 50.0)])
def test_encoding_matches_the_formula_in_float64(reference, max_seq_len, d_model, base):
    pe = reference.get_positional_encoding(max_seq_len, d_model, base)
    assert pe.shape == (max_seq_len, d_model) and pe.dtype == torch.float32
    pos = torch.arange(max_seq_len, dtype=torch.float64)[:, None]
    pair = torch.arange(d_model, dtype=torch.float64)[None, :] // 2
    angle = pos / base ** (2 * pair / d_model)
    expected = torch.where(torch.arange(d_model) % 2 == 0, angle.sin(), angle.cos())
    assert (pe.double() - expected).abs().max() < 1e-6  # float32 rounding, nothing more


@pytest.mark.parametrize("k", [-7, -1, 0, 1, 5, 40])
def test_shift_matrix_satisfies_the_identity(reference, k):
    d_model, n = 16, 64
    pe = reference.get_positional_encoding(n, d_model).double()
    m = reference.shift_matrix(k, d_model).double()
    src = torch.arange(max(0, -k), min(n, n - k))
    assert (pe[src] @ m.T - pe[src + k]).abs().max() < 1e-5
    assert (m @ m.T - torch.eye(d_model, dtype=torch.float64)).abs().max() < 1e-6, "a rotation is orthogonal"


def test_module_keeps_the_table_as_a_buffer_not_a_parameter(reference):
    module = reference.PositionalEncoding(8, max_seq_len=10)
    assert list(module.parameters()) == [] and "pe" in module.state_dict()
    assert module.to("meta").pe.device.type == "meta", "the buffer follows .to()"


@pytest.mark.parametrize(
    "call, word",
    [
        (lambda r: r.get_positional_encoding(0, 8), "max_seq_len"),
        (lambda r: r.get_positional_encoding(4, 7), "d_model"),
        (lambda r: r.shift_matrix(1, 3), "d_model"),
        (lambda r: r.PositionalEncoding(8, max_seq_len=2)(torch.zeros(1, 3, 8)), "max_seq_len"),
        (lambda r: r.PositionalEncoding(8)(torch.zeros(1, 3, 4)), "d_model"),
        (lambda r: r.split_heads(torch.zeros(2, 3, 10), 4), "num_heads"),
        (lambda r: r.split_heads(torch.zeros(3, 10), 2), "(batch, seq, d_model)"),
        (lambda r: r.combine_heads(torch.zeros(3, 10, 2)), "(batch, heads, seq, head_dim)"),
        (lambda r: r.MultiHeadAttention(10, 3), "num_heads"),
    ],
)
def test_errors_are_value_errors_that_name_the_argument(reference, call, word):
    with pytest.raises(ValueError, match=word.replace("(", r"\(").replace(")", r"\)")):
        call(reference)


def test_attention_matches_torch_with_masks_and_gradients_reach_every_projection(reference):
    torch.manual_seed(1)
    ours = reference.MultiHeadAttention(32, 4)
    checks = load_public_checks()
    theirs = checks.torch_twin(checks.projection_weights(ours), 32, 4)
    x = torch.randn(3, 7, 32)
    causal = torch.tril(torch.ones(7, 7, dtype=torch.bool))
    out, weights = ours(x, mask=causal, return_weights=True)
    ref_out, ref_weights = theirs(x, x, x, attn_mask=~causal, average_attn_weights=False)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights, ref_weights, atol=1e-6, rtol=1e-5)
    out.sum().backward()
    for name in checks.PROJECTIONS:
        assert getattr(ours, name).weight.grad.abs().sum() > 0, name


def test_attention_is_stable_on_huge_scores(reference):
    q = torch.full((1, 2, 4), 1e4)
    out, weights = reference.scaled_dot_product_attention(q, q, torch.randn(1, 2, 3))
    assert torch.isfinite(out).all() and torch.isfinite(weights).all()


def test_solutions_are_vectorized_with_no_python_loops():
    for name in LESSON.student_files:
        tree = ast.parse((LESSON.solutions / name).read_text())
        loops = [n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.While, ast.comprehension))]
        assert not loops, f"{name}:{loops[0].lineno if loops else ''}: a Python loop in the reference"


def test_solutions_do_not_use_the_forbidden_builtins():
    forbidden = {path.rsplit(".", 1)[-1] for path in CONTRACT.forbidden}
    assert "scaled_dot_product_attention" in forbidden  # the contract read: an empty list would pass vacuously
    for name in LESSON.student_files:
        tree = ast.parse((LESSON.solutions / name).read_text())
        attributes = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        assert not attributes & forbidden, f"{name} calls {attributes & forbidden}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.uint8])
def test_a_mask_that_is_not_boolean_is_refused_with_type_error(reference, dtype):
    q = torch.randn(1, 3, 4)
    keep = torch.tril(torch.ones(3, 3)).to(dtype)
    with pytest.raises(TypeError, match="boolean"):
        reference.scaled_dot_product_attention(q, q, q, mask=keep)
    with pytest.raises(TypeError, match="boolean"):
        reference.MultiHeadAttention(4, 2)(q, mask=keep)


def test_a_query_with_every_key_blocked_gets_zeros_not_nan(reference):
    torch.manual_seed(2)
    q, k, v = torch.randn(2, 3, 4, requires_grad=True), torch.randn(2, 3, 4), torch.randn(2, 3, 5)
    mask = torch.tensor([[True, True, False], [False, False, False], [True, False, False]])
    out, weights = reference.scaled_dot_product_attention(q, k, v, mask=mask)
    assert torch.equal(weights[:, 1], torch.zeros(2, 3)) and torch.equal(out[:, 1], torch.zeros(2, 5))
    kept = mask.any(-1)
    expected, _ = reference.scaled_dot_product_attention(q[:, kept], k, v, mask=mask[kept])
    torch.testing.assert_close(out[:, kept], expected)
    torch.testing.assert_close(out, torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    out.sum().backward()
    assert torch.isfinite(q.grad).all(), "the blocked row must not send NaN gradients back"
