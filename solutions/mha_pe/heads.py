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
    ### BEGIN SOLUTION
    ### HINT: first give the feature axis a (num_heads, head_dim) shape, then move the head axis in front of
    ### HINT: the sequence axis.
    if x.dim() != 3:
        raise ValueError(f"x must be (batch, seq, d_model), got {x.dim()} dimensions")
    d_model = x.shape[-1]
    if num_heads < 1 or d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    x = x.unflatten(-1, (num_heads, d_model // num_heads))  # (batch, seq, heads, head_dim)
    return x.transpose(1, 2)  # (batch, heads, seq, head_dim)
    ### END SOLUTION


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
    ### BEGIN SOLUTION
    ### HINT: undo split_heads in reverse order; after a transpose the memory is no longer contiguous, which
    ### HINT: .view() refuses.
    if x.dim() != 4:
        raise ValueError(f"x must be (batch, heads, seq, head_dim), got {x.dim()} dimensions")
    x = x.transpose(1, 2)  # (batch, seq, heads, head_dim)
    return x.flatten(2)  # (batch, seq, heads * head_dim); copies, since x is not contiguous
    ### END SOLUTION
