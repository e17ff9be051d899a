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
    ### BEGIN SOLUTION
    ### HINT: check the arguments first; then build a (max_seq_len, 1) column of positions and a (d_model //
    ### HINT: 2,) row of frequencies: broadcasting gives every angle at once.
    if max_seq_len < 1:
        raise ValueError(f"max_seq_len must be at least 1, got {max_seq_len}")
    if d_model < 1 or d_model % 2 != 0:  # sin and cos come in pairs
        raise ValueError(f"d_model must be a positive even integer, got {d_model}")
    position = torch.arange(max_seq_len, dtype=torch.float64).unsqueeze(1)  # (seq, 1)
    even_dims = torch.arange(0, d_model, 2, dtype=torch.float64)  # (d_model/2,) = 2i
    inv_freq = float(base) ** (-even_dims / d_model)  # (d_model/2,)
    # Angles reach thousands of radians, where float32 has lost the digits
    # sin/cos depend on: form them in float64 and reduce them to one turn
    # before rounding to float32 (exact for sin and cos, and fast).
    angles = (position * inv_freq).remainder(2 * math.pi).to(torch.float32)  # (seq, d_model/2)
    # Interleave: stacking on a new last axis then flattening puts
    # sin(angle_i) at column 2i and cos(angle_i) at column 2i + 1.
    pe = torch.stack((angles.sin(), angles.cos()), dim=-1)  # (seq, d_model/2, 2)
    return pe.flatten(1)  # (seq, d_model)
    ### END SOLUTION


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
    ### BEGIN SOLUTION
    ### HINT: check d_model first; then write sin((pos+k)w) and cos((pos+k)w) with the angle-addition
    ### HINT: formulas; the 2x2 block of each pair only involves cos(kw) and sin(kw).
    if d_model < 1 or d_model % 2 != 0:
        raise ValueError(f"d_model must be a positive even integer, got {d_model}")
    even_dims = torch.arange(0, d_model, 2, dtype=torch.float64)  # (d_model/2,) = 2i
    shift = float(k) * float(base) ** (-even_dims / d_model)  # (d_model/2,) = k * w_i
    cos_kw, sin_kw = shift.cos(), shift.sin()
    idx = torch.arange(0, d_model, 2)  # row/column of each pair's sine feature
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    # sin(a + b) =  sin(a) cos(b) + cos(a) sin(b)
    m[idx, idx] = cos_kw
    m[idx, idx + 1] = sin_kw
    # cos(a + b) = -sin(a) sin(b) + cos(a) cos(b)
    m[idx + 1, idx] = -sin_kw
    m[idx + 1, idx + 1] = cos_kw
    return m.to(torch.float32)
    ### END SOLUTION


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
        ### BEGIN SOLUTION
        ### HINT: nn.Module.register_buffer keeps a tensor with the module without making it trainable.
        self.d_model = d_model
        self.max_seq_len = max_seq_len
        self.register_buffer("pe", get_positional_encoding(max_seq_len, d_model, base))
        ### END SOLUTION

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
        ### BEGIN SOLUTION
        ### HINT: slice the first seq rows of the buffer; broadcasting adds them to every batch element.
        seq_len, d_model = x.shape[-2], x.shape[-1]
        if d_model != self.pe.shape[1]:
            raise ValueError(f"x must end in d_model={self.pe.shape[1]} features, got {d_model}")
        if seq_len > self.pe.shape[0]:
            raise ValueError(f"sequence length {seq_len} exceeds max_seq_len={self.pe.shape[0]}")
        return x + self.pe[:seq_len]  # (batch, seq, d_model) + (seq, d_model)
        ### END SOLUTION
