"""Splitting a projected vector into attention heads, and gluing the heads back together.

Multi-head attention does not run several full-size attentions. It projects
each token once to ``d_model`` features and then reads those features as
``num_heads`` contiguous chunks of ``head_dim = d_model // num_heads``: head
``h`` owns features ``h*head_dim : (h+1)*head_dim``. Each head then attends
on its own, and :func:`combine_heads` concatenates the heads' results in the
same order, so the two functions are exact inverses. Both only rearrange their
input, so they work on any device and dtype. Each function leaves its input
tensors unchanged.
"""


def split_heads(x, num_heads):
    """Reshape projected features into per-head chunks.

    Args:
        x: ``(batch, seq, d_model)`` projected features.
        num_heads: number of heads; must divide ``d_model``.

    Returns:
        ``(batch, num_heads, seq, head_dim)`` with ``head_dim = d_model // num_heads``,
        where ``out[b, h, s] == x[b, s, h*head_dim:(h+1)*head_dim]``.

    Raises:
        ValueError: ``x`` is not 3-D, or ``d_model`` is not divisible by ``num_heads``.
    """
    # YOUR CODE HERE
    # Hint: first give the feature axis a (num_heads, head_dim) shape, then move the
    # head axis in front of the sequence axis.
    raise NotImplementedError("split_heads is not implemented yet")


def combine_heads(x):
    """Concatenate per-head features back into one vector per token (inverse of :func:`split_heads`).

    Args:
        x: ``(batch, heads, seq, head_dim)``.

    Returns:
        ``(batch, seq, heads * head_dim)`` where head ``h`` fills features
        ``h*head_dim : (h+1)*head_dim``; ``combine_heads(split_heads(x, n))`` equals ``x``.

    Raises:
        ValueError: ``x`` is not 4-D.
    """
    # YOUR CODE HERE
    # Hint: undo split_heads in reverse order; after a transpose the memory is no longer
    # contiguous, which .view() refuses.
    raise NotImplementedError("combine_heads is not implemented yet")
