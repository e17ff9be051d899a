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
    # YOUR CODE HERE
    # Hint: a blocked key should get weight exactly 0 after the softmax; think about
    # which score makes exp() return 0.
    raise NotImplementedError("scaled_dot_product_attention is not implemented yet")


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
        # YOUR CODE HERE
        # Hint: check the sizes, store num_heads and head_dim, then create the four
        # layers with exactly the names above.
        raise NotImplementedError("MultiHeadAttention.__init__ is not implemented yet")

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
        # YOUR CODE HERE
        # Hint: project, split_heads, attend, combine_heads, out_proj: five steps, the
        # heads.py helpers do the reshaping.
        raise NotImplementedError("MultiHeadAttention.forward is not implemented yet")
