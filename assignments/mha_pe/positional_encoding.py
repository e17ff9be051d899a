"""Sinusoidal positional encoding: a fixed, position-dependent signal added to embeddings.

Self-attention alone cannot tell word orders apart (permuting its input only
permutes its output). Adding a different vector to each position breaks that
symmetry. Each pair of features (2i, 2i+1) holds one sine/cosine "clock hand"
turning at its own angular frequency ``base ** (-2i / d_model)``: the first
pair turns once every 2*pi positions, the last one slowest of all.

Every function and forward here leaves its input tensors unchanged.
"""

import math

import torch
from torch import nn


def get_positional_encoding(max_seq_len, d_model, base=10000.0):
    """Return the sinusoidal positional-encoding table.

    Row ``pos`` is the encoding of position ``pos`` (positions start at 0).
    For every pair index ``i`` in ``0 .. d_model/2 - 1``::

        PE[pos, 2i]     = sin(pos / base ** (2i / d_model))
        PE[pos, 2i + 1] = cos(pos / base ** (2i / d_model))

    so sines sit in the even columns and cosines in the odd ones, interleaved.

    Mind the two meanings of ``i``: here it is the pair index (0, 1, 2, ...), and the
    exponent is ``2i / d_model``. The lesson's code lets its ``i`` run over the even
    columns (0, 2, 4, ...) and divides that by ``d_model``: its ``i`` is this ``2i``.
    Doubling it again gives every pair the wrong frequency.

    Build the table with whole-tensor operations: a column of positions times a row
    of frequencies gives every angle at once (broadcasting). A Python loop over the
    positions, like the lesson's double loop, is too slow and loses points.

    Precision: a plain float32 computation is accurate enough. Its rounding error
    grows with the position (about 1e-4 near position 1000, more further along) and
    the comparison allows for that; a larger difference, above all at small
    positions, comes from the formula, not from float32.

    Args:
        max_seq_len: number of positions (rows), at least 1.
        d_model: embedding size (columns), a positive even integer.
        base: the constant that sets how slowly the slowest pair turns.

    Returns:
        float32 tensor of shape ``(max_seq_len, d_model)``.

    Raises:
        ValueError: ``max_seq_len < 1``, or ``d_model`` not a positive even integer.
    """
    # YOUR CODE HERE
    # Hint: check the arguments first; then build a (max_seq_len, 1) column of positions
    # and a (d_model // 2,) row of frequencies: broadcasting gives every angle at once.
    raise NotImplementedError("get_positional_encoding is not implemented yet")


def shift_matrix(k, d_model, base=10000.0):
    """Return the fixed matrix ``M`` that moves an encoding ``k`` positions along.

    For every position ``pos`` (and any integer ``k``, negative included)::

        PE[pos + k] == M @ PE[pos]

    This is the angle-addition identity: for one frequency ``w`` the pair
    ``(sin(pos*w), cos(pos*w))`` turns into ``(sin((pos+k)*w), cos((pos+k)*w))``
    by a 2x2 rotation that depends on ``k*w`` only, never on ``pos``. ``M`` is
    block diagonal with one such 2x2 block per feature pair.

    Mind the direction: the pair is stored sine first, so its block (rows and
    columns in the order sin, cos) is ``[[cos(k*w), sin(k*w)], [-sin(k*w), cos(k*w)]]``:
    the new sine is ``sin*cos(k*w) + cos*sin(k*w)``. The textbook rotation
    ``[[cos, -sin], [sin, cos]]`` acts on (cos, sin) pairs; used on (sin, cos)
    it moves the encoding backwards.

    Args:
        k: the offset, in positions.
        d_model: embedding size, a positive even integer.
        base: must match the ``base`` of the encoding it is applied to.

    Returns:
        float32 tensor of shape ``(d_model, d_model)``, built from the exact
        frequencies of :func:`get_positional_encoding` with the same ``base``.

    Raises:
        ValueError: ``d_model`` not a positive even integer.
    """
    # YOUR CODE HERE
    # Hint: check d_model first; then write sin((pos+k)w) and cos((pos+k)w) with the
    # angle-addition formulas; the 2x2 block of each pair only involves cos(kw) and
    # sin(kw).
    raise NotImplementedError("shift_matrix is not implemented yet")


class PositionalEncoding(nn.Module):
    """Adds the sinusoidal table to a batch of embeddings.

    The table is stored as a buffer named ``pe`` of shape
    ``(max_seq_len, d_model)``: it is part of the module's state (it follows
    ``.to(device)`` and ``.to(dtype)``, and appears in ``state_dict``) but it is
    not a parameter, because nothing about it is learned. The module has no
    parameters at all.

    Args:
        d_model: embedding size, a positive even integer.
        max_seq_len: longest sequence the module accepts.
        base: see :func:`get_positional_encoding`.
    """

    def __init__(self, d_model, max_seq_len=5000, base=10000.0):
        super().__init__()
        # YOUR CODE HERE
        # Hint: nn.Module.register_buffer keeps a tensor with the module without making
        # it trainable.
        raise NotImplementedError("PositionalEncoding.__init__ is not implemented yet")

    def forward(self, x):
        """Return ``x`` plus the encoding of each position.

        Read the rows from the ``pe`` buffer rather than building a table here:
        the buffer is on whatever device the module was moved to.

        Args:
            x: ``(batch, seq, d_model)`` embeddings, ``seq <= max_seq_len``.

        Returns:
            ``(batch, seq, d_model)``: ``x[b, pos] + pe[pos]``.

        Raises:
            ValueError: ``seq > max_seq_len``, or the last dimension is not ``d_model``.
        """
        # YOUR CODE HERE
        # Hint: slice the first seq rows of the buffer; broadcasting adds them to every
        # batch element.
        raise NotImplementedError("PositionalEncoding.forward is not implemented yet")
