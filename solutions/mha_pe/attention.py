"""Scaled dot-product attention and multi-head self-attention, built from plain tensor operations.

You may not call ``torch.nn.MultiheadAttention``,
``torch.nn.functional.scaled_dot_product_attention`` or
``torch.nn.functional.multi_head_attention_forward`` here: the point of the
exercise is to build them. The grader checks your module against PyTorch's
``nn.MultiheadAttention`` given the same weights.
"""

import math

import torch
from torch import nn

from .heads import combine_heads, split_heads


def scaled_dot_product_attention(q, k, v, mask=None):
    """Attend from every query to every key and average the values accordingly.

    ``weights = softmax(q @ k^T / sqrt(d))`` over the key axis, then
    ``output = weights @ v``. Dividing by ``sqrt(d)`` keeps the scores'
    spread independent of the feature size, so the softmax does not saturate.

    Args:
        q: ``(..., seq_q, d)`` queries.
        k: ``(..., seq_k, d)`` keys.
        v: ``(..., seq_k, d_v)`` values.
        mask: optional boolean tensor broadcastable to ``(..., seq_q, seq_k)``;
            ``True`` means the query may attend to that key, ``False`` blocks it
            (the convention of ``torch.nn.functional.scaled_dot_product_attention``).
            Every query must be allowed at least one key.

    Returns:
        ``(output, weights)``: output ``(..., seq_q, d_v)``, weights
        ``(..., seq_q, seq_k)`` with each row summing to 1.
    """
    ### BEGIN SOLUTION
    ### HINT: a blocked key should get weight exactly 0 after the softmax; think about which score makes exp()
    ### HINT: return 0.
    scale = 1.0 / math.sqrt(q.shape[-1])
    scores = (q * scale) @ k.transpose(-2, -1)  # (..., seq_q, seq_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)  # normalise over keys
    return weights @ v, weights  # (..., seq_q, d_v), (..., seq_q, seq_k)
    ### END SOLUTION


class MultiHeadAttention(nn.Module):
    """Multi-head self-attention.

    Four ``nn.Linear(d_model, d_model)`` layers: ``q_linear``, ``k_linear``,
    ``v_linear`` project the whole input for all heads at once, and
    ``out_proj`` mixes the concatenated heads. Attributes: ``num_heads``, and
    ``head_dim``, the width of one head (``d_model`` divided by ``num_heads``).

    Args:
        d_model: model width.
        num_heads: number of heads; must divide ``d_model``.

    Raises:
        ValueError: ``d_model`` is not divisible by ``num_heads``.
    """

    def __init__(self, d_model, num_heads):
        super().__init__()
        ### BEGIN SOLUTION
        ### HINT: check the sizes, store num_heads and head_dim, then create the four layers with exactly the
        ### HINT: names above.
        if num_heads < 1 or d_model % num_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.q_linear = nn.Linear(d_model, d_model)
        self.k_linear = nn.Linear(d_model, d_model)
        self.v_linear = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        ### END SOLUTION

    def forward(self, x, mask=None, return_weights=False):
        """Self-attention of ``x`` over itself.

        Args:
            x: ``(batch, seq, d_model)``.
            mask: optional boolean tensor broadcastable to
                ``(batch, num_heads, seq, seq)``, ``True`` = may attend; for
                example a ``(seq, seq)`` causal mask or a ``(batch, 1, 1, seq)``
                padding mask.
            return_weights: also return the attention weights of every head.

        Returns:
            ``(batch, seq, d_model)``; or ``(output, weights)`` with weights
            ``(batch, num_heads, seq, seq)`` when ``return_weights`` is true.
        """
        ### BEGIN SOLUTION
        ### HINT: project, split_heads, attend, combine_heads, out_proj: five steps, the heads.py helpers do
        ### HINT: the reshaping.
        q = split_heads(self.q_linear(x), self.num_heads)  # (batch, heads, seq, head_dim)
        k = split_heads(self.k_linear(x), self.num_heads)  # (batch, heads, seq, head_dim)
        v = split_heads(self.v_linear(x), self.num_heads)  # (batch, heads, seq, head_dim)
        attended, weights = scaled_dot_product_attention(q, k, v, mask)  # (batch, heads, seq, head_dim)
        out = self.out_proj(combine_heads(attended))  # (batch, seq, d_model)
        return (out, weights) if return_weights else out
        ### END SOLUTION
