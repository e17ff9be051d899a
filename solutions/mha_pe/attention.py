"""Scaled dot-product attention and multi-head self-attention, built from plain tensor operations.

You may not call ``torch.nn.MultiheadAttention``,
``torch.nn.functional.scaled_dot_product_attention``,
``torch.nn.functional.multi_head_attention_forward``,
``torch._native_multi_head_attention``, nor the attention PyTorch computes
behind them: ``torch._scaled_dot_product_attention_math``,
``torch._scaled_dot_product_flash_attention_for_cpu``,
``torch._decomp.decompositions.scaled_dot_product_flash_attention_for_cpu``
and ``torch.nn.attention.flex_attention.flex_attention`` here: the point of
the exercise is to build them. The grader checks your module against PyTorch's
``nn.MultiheadAttention`` given the same weights. Every function and forward
here leaves its input tensors unchanged.
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
    Scores can be large (hundreds): use ``torch.softmax``, which subtracts each
    row's maximum, rather than ``exp(scores) / sum``, which overflows.

    Any number of leading batch dimensions, zero included: ``q`` may be
    ``(seq_q, d)``, ``(batch, seq_q, d)``, ``(batch, heads, seq_q, d)`` and so on,
    with ``k`` and ``v`` sharing those leading dimensions. Work on the last two
    axes only (``k.transpose(-2, -1)``, ``softmax(dim=-1)``), never on a fixed rank.
    Create any new tensor on the inputs' device: a mask or a table of zeros
    made here (``torch.zeros(..., device=q.device)``, ``torch.ones_like(scores)``)
    follows the inputs; a plain ``torch.tensor(-1e9)`` number may join them.

    Args:
        q: ``(..., seq_q, d)`` queries.
        k: ``(..., seq_k, d)`` keys.
        v: ``(..., seq_k, d_v)`` values.
        mask: optional ``torch.bool`` tensor broadcastable to ``(..., seq_q, seq_k)``;
            ``True`` means the query may attend to that key, ``False`` blocks it.
            A blocked key gets weight exactly 0. A query whose keys are all
            blocked attends to nothing: its row of weights and its output are all
            zeros, never NaN. Filling blocked scores alone does not give that:
            with ``-inf`` such a row's softmax is NaN, with ``-1e9`` it is equal
            weights (1/seq_k each); set that row to zeros yourself.

    Returns:
        ``(output, weights)``: output ``(..., seq_q, d_v)``, weights
        ``(..., seq_q, seq_k)`` with each row summing to 1 (0 for a query
        whose keys are all blocked).

    Raises:
        TypeError: ``mask`` is not a boolean tensor. A float or integer mask is
            ambiguous (1 = keep, or a score to add?), so it is refused, not guessed.
    """
    ### BEGIN SOLUTION
    ### HINT: a blocked key should get weight exactly 0 after the softmax; think about which score makes exp()
    ### HINT: return 0. A query with every key blocked then gets NaN: set its row to 0 (mask.any(dim=-1) says
    ### HINT: which queries keep a key).
    if mask is not None and mask.dtype != torch.bool:
        raise TypeError(f"mask must be a boolean tensor (True = may attend), got {mask.dtype}")
    scale = 1.0 / math.sqrt(q.shape[-1])
    scores = (q * scale) @ k.transpose(-2, -1)  # (..., seq_q, seq_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)  # normalise over keys
    if mask is not None:
        # A row of -inf scores softmaxes to NaN: a query with no key left gets zero weights instead.
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return weights @ v, weights  # (..., seq_q, d_v), (..., seq_q, seq_k)
    ### END SOLUTION


class MultiHeadAttention(nn.Module):
    """Multi-head self-attention.

    Four ``nn.Linear(d_model, d_model)`` layers (with their bias, the default):
    ``q_linear``, ``k_linear``, ``v_linear`` project the whole input for all
    heads at once, and ``out_proj`` mixes the concatenated heads. Attributes:
    ``num_heads``, and ``head_dim``, the width of one head (``d_model`` divided
    by ``num_heads``).

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

        Sequences in the batch never see each other, and the result must not
        depend on a fixed device: derive any new tensor from ``x`` or the
        module's own parameters. Two calls with the same input give the same
        output: no dropout or other randomness.

        Args:
            x: ``(batch, seq, d_model)``, exactly 3-D (for one sequence, pass
                ``x[None]``).
            mask: optional ``torch.bool`` tensor broadcastable to
                ``(batch, num_heads, seq, seq)``, ``True`` = may attend, as in
                :func:`scaled_dot_product_attention`; for example a ``(seq, seq)``
                causal mask or a ``(batch, 1, 1, seq)`` padding mask.
            return_weights: also return the attention weights of every head.

        Returns:
            ``(batch, seq, d_model)``; or ``(output, weights)`` with weights
            ``(batch, num_heads, seq, seq)`` when ``return_weights`` is true.

        Raises:
            ValueError: ``x`` is not 3-D (``split_heads`` refuses it).
            TypeError: ``mask`` is not a boolean tensor.
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
