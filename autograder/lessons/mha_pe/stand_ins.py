"""Stand-ins for the parts other code is built on: when a student's part fails its own checks, the checks of the
code that uses it run with these in its place (see hidden_tests/support.py's ``needs``), so one slip in a helper
is charged to the helper alone.

The judge sends this file's text to the student's worker, so it holds nothing a student could not write from the
course text and the docstrings: each is the lesson's recipe, with the errors its docstring promises. It is not the
reference solution and it is not secret. tests/test_stand_ins.py proves each behaves like the reference.
"""

import math

import torch


def get_positional_encoding(max_seq_len, d_model, base=10000.0):
    if max_seq_len < 1 or d_model < 1 or d_model % 2:
        raise ValueError("max_seq_len must be at least 1 and d_model a positive even integer")
    rates = float(base) ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float64), rates) % (2 * math.pi)
    table = torch.empty(max_seq_len, d_model, dtype=torch.float32)
    table[:, 0::2], table[:, 1::2] = angles.float().sin(), angles.float().cos()
    return table


def split_heads(x, num_heads):
    if x.dim() != 3 or num_heads < 1 or x.shape[-1] % num_heads:
        raise ValueError("x must be 3-D with a last dimension that num_heads divides")
    batch, seq, width = x.shape
    return x.reshape(batch, seq, num_heads, width // num_heads).permute(0, 2, 1, 3)


def combine_heads(x):
    if x.dim() != 4:
        raise ValueError("x must be 4-D")
    batch, heads, seq, head_dim = x.shape
    return x.permute(0, 2, 1, 3).reshape(batch, seq, heads * head_dim)


def scaled_dot_product_attention(q, k, v, mask=None):
    if mask is not None and mask.dtype != torch.bool:
        raise TypeError("mask must be a boolean tensor")
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is None:
        weights = torch.softmax(scores, dim=-1)
    else:
        weights = torch.softmax(scores.masked_fill(~mask, -math.inf), dim=-1)
        weights = torch.where(mask.any(dim=-1, keepdim=True), weights, torch.zeros((), dtype=weights.dtype,
                                                                                     device=weights.device))
    return weights @ v, weights
