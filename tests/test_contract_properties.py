"""Property-based tests of the contract itself, run against the reference solutions."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

FAST = settings(max_examples=40, deadline=None)
even = st.integers(1, 24).map(lambda half: 2 * half)


@FAST
@given(max_seq_len=st.integers(1, 64), d_model=even, base=st.sampled_from([100.0, 10000.0, 1e5]))
def test_encoding_shape_range_and_first_row(reference, max_seq_len, d_model, base):
    pe = reference.get_positional_encoding(max_seq_len, d_model, base)
    assert pe.shape == (max_seq_len, d_model) and pe.dtype == torch.float32
    assert pe.abs().max() <= 1.0 + 1e-6
    assert torch.allclose(pe[0], torch.tensor([0.0, 1.0]).repeat(d_model // 2))
    # every (sin, cos) pair lies on the unit circle
    assert torch.allclose(pe[:, 0::2] ** 2 + pe[:, 1::2] ** 2, torch.ones(max_seq_len, d_model // 2), atol=1e-5)


@FAST
@given(k=st.integers(-30, 30), d_model=even)
def test_shift_identity_for_any_offset(reference, k, d_model):
    n = 48
    pe = reference.get_positional_encoding(n, d_model).double()
    m = reference.shift_matrix(k, d_model).double()
    src = torch.arange(max(0, -k), min(n, n - k))
    assert torch.allclose(pe[src] @ m.T, pe[src + k], atol=1e-5)
    back = reference.shift_matrix(-k, d_model).double()
    assert torch.allclose(m @ back, torch.eye(d_model, dtype=torch.float64), atol=1e-5), "M_-k undoes M_k"


@FAST
@given(batch=st.integers(1, 3), seq=st.integers(1, 6), heads=st.integers(1, 5), head_dim=st.integers(1, 5))
def test_split_and_combine_are_inverse_reshapes(reference, batch, seq, heads, head_dim):
    x = torch.randn(batch, seq, heads * head_dim)
    split = reference.split_heads(x, heads)
    assert split.shape == (batch, heads, seq, head_dim)
    for h in range(heads):
        assert torch.equal(split[:, h], x[..., h * head_dim:(h + 1) * head_dim])
    assert torch.equal(reference.combine_heads(split), x)


@FAST
@given(lead=st.lists(st.integers(1, 3), max_size=2), seq_q=st.integers(1, 6), seq_k=st.integers(1, 6),
       d=st.integers(1, 8), d_v=st.integers(1, 8))
def test_attention_shapes_and_distributions(reference, lead, seq_q, seq_k, d, d_v):
    q, k, v = torch.randn(*lead, seq_q, d), torch.randn(*lead, seq_k, d), torch.randn(*lead, seq_k, d_v)
    out, weights = reference.scaled_dot_product_attention(q, k, v)
    assert out.shape == (*lead, seq_q, d_v) and weights.shape == (*lead, seq_q, seq_k)
    assert torch.allclose(weights.sum(-1), torch.ones(*lead, seq_q), atol=1e-5) and (weights >= 0).all()


@FAST
@given(seq=st.integers(2, 8), heads=st.sampled_from([1, 2, 4]), seed=st.integers(0, 1000))
def test_attention_is_permutation_equivariant_until_positions_are_added(reference, seq, heads, seed):
    torch.manual_seed(seed)
    d_model = 8
    attend = reference.MultiHeadAttention(d_model, heads)
    encode = reference.PositionalEncoding(d_model, max_seq_len=16)
    x = torch.randn(2, seq, d_model)
    perm = torch.roll(torch.arange(seq), 1)
    with torch.no_grad():
        assert torch.allclose(attend(x[:, perm]), attend(x)[:, perm], atol=1e-5)
        moved = attend(encode(x[:, perm]))
        assert not torch.allclose(moved, attend(encode(x))[:, perm], atol=1e-4)
