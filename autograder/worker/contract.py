"""The assignment's public names and the student file each one lives in."""

# name -> module (file stem) of the student package
NAMES = {
    "get_positional_encoding": "positional_encoding",
    "shift_matrix": "positional_encoding",
    "PositionalEncoding": "positional_encoding",
    "split_heads": "heads",
    "combine_heads": "heads",
    "scaled_dot_product_attention": "attention",
    "MultiHeadAttention": "attention",
}
CLASSES = frozenset({"PositionalEncoding", "MultiHeadAttention"})
MODULES = ("positional_encoding", "heads", "attention")
PACKAGE = "mha_pe"

# Library calls that would skip the part of the assignment they replace.
FORBIDDEN = {
    "MultiheadAttention": "torch.nn.MultiheadAttention",
    "scaled_dot_product_attention": "torch.nn.functional.scaled_dot_product_attention",
    "multi_head_attention_forward": "torch.nn.functional.multi_head_attention_forward",
    "_native_multi_head_attention": "torch._native_multi_head_attention",
}
