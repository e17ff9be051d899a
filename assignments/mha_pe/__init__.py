"""mha_pe: positional encoding and multi-head attention, built from scratch.

Implement the functions in ``positional_encoding.py``, ``heads.py`` and
``attention.py`` (in that order: attention uses the head helpers), then run
the public tests with ``pytest``.
"""

from .attention import MultiHeadAttention, scaled_dot_product_attention
from .heads import combine_heads, split_heads
from .positional_encoding import PositionalEncoding, get_positional_encoding, shift_matrix

__all__ = [
    "MultiHeadAttention",
    "PositionalEncoding",
    "combine_heads",
    "get_positional_encoding",
    "scaled_dot_product_attention",
    "shift_matrix",
    "split_heads",
]
