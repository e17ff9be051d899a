"""Hidden tests: splitting projected features into heads and concatenating them back."""

import torch

from autograder.lesson_api import device_of, graded
from .support import Calls, close, each_case, needs, randn, student_raises, tensor

GROUP = "heads"
SIZES = dict(batch=range(1, 4), seq=range(1, 6), heads=range(1, 5), head_dim=range(1, 5))


@graded(3, "split_heads turns (batch, seq, d_model) into (batch, num_heads, seq, d_model // num_heads), for "
           "any sizes including batch 1, sequence length 1, one head and head_dim 1.", topic="heads-shape")
@each_case(examples=[dict(batch=2, seq=3, heads=4, head_dim=1)], **SIZES)
def test_split_shape(student, batch, seq, heads, head_dim):
    """split_heads returns (batch, num_heads, seq, head_dim)"""
    out = student.split_heads(torch.zeros(batch, seq, heads * head_dim), heads)
    tensor(out, (batch, heads, seq, head_dim))


@graded(4, "Heads must be contiguous chunks of the projected vector: head h holds features "
           "h*head_dim .. (h+1)*head_dim - 1 (not every num_heads-th feature).", topic="heads-chunks")
@needs("split_heads")
def test_heads_are_contiguous_chunks(student):
    """Head h holds a contiguous chunk of features"""
    x = torch.arange(24.0).reshape(2, 1, 12)  # one token per sequence: which features, not which token
    out = tensor(student.split_heads(x, 3), (2, 3, 1, 4))
    close(out[:, :, 0], x.reshape(2, 3, 4), atol=0)


@graded(3, "Split the feature axis first and then move the head axis in front of the sequence axis: reshaping "
           "straight to (batch, heads, seq, head_dim) mixes features of different tokens.", topic="heads-tokens")
@needs("split_heads")
def test_split_keeps_tokens_apart(student):
    """Each head's row s comes from token s only"""
    # Every value names its token (value // 1000): which token each row came from, whatever the chunks.
    x = (torch.arange(5.0)[None, :, None] * 1000 + torch.arange(12.0)).expand(2, 5, 12)
    out = tensor(student.split_heads(x, 4), (2, 4, 5, 3))
    close(torch.div(out, 1000, rounding_mode="floor"), torch.arange(5.0)[:, None].expand(2, 4, 5, 3), atol=0)


@graded(2, "combine_heads turns (batch, heads, seq, head_dim) into (batch, seq, heads * head_dim), whatever the "
           "memory layout of its input: after a transpose it is not contiguous, which .view() refuses (use reshape, "
           "or .contiguous() first).", topic="heads-shape")
@each_case(**SIZES)
def test_combine_shape(student, batch, seq, heads, head_dim):
    """combine_heads returns (batch, seq, heads * head_dim)"""
    tensor(student.combine_heads(torch.zeros(batch, heads, seq, head_dim)), (batch, seq, heads * head_dim))


@graded(3, "combine_heads is the exact inverse of split_heads: glue the heads side by side in order. The "
           "heads' tensor is usually not contiguous after a transpose, so use reshape (or .contiguous() "
           "before .view()).", topic="heads-combine")
@needs("combine_heads")
@each_case(**SIZES)
def test_round_trip(student, reference, batch, seq, heads, head_dim):
    """combine_heads(split_heads(x)) gives back x"""
    x = randn(batch, seq, heads * head_dim, seed=batch + 10 * seq)
    # The student's combine on the reference's (non-contiguous) split: the split is judged on its own.
    close(student.combine_heads(reference.split_heads(x, heads)), x, atol=0)


@graded(3, "combine_heads puts head h's features at positions h*head_dim .. (h+1)*head_dim - 1 of each "
           "token's output vector.", visibility="hidden", topic="heads-combine")
@needs("combine_heads")
def test_combine_places_heads_in_order(student, reference):
    """combine_heads places each head's features in order"""
    x = randn(2, 3, 4, 5, seed=3)
    close(student.combine_heads(x), reference.combine_heads(x), atol=0)


@graded(2, "Bad shapes raise ValueError: split_heads needs an exactly 3-D input whose width num_heads divides "
           "(zero heads divide nothing), combine_heads a 4-D input.", topic="validation")
def test_bad_shapes_raise_value_error(student):
    """Bad shapes raise ValueError"""
    later = Calls(student)
    answers = [later(lambda: student.split_heads(torch.zeros(2, 5, 10), 4)),  # every call before any read
               later(lambda: student.split_heads(torch.zeros(2, 5, 12), 0)),
               later(lambda: student.split_heads(torch.zeros(5, 12), 4)),
               later(lambda: student.split_heads(torch.zeros(2, 3, 5, 12), 4)),  # more than 3-D is refused too
               later(lambda: student.combine_heads(torch.zeros(2, 5, 12)))]
    for answer in answers:
        with student_raises("ValueError"):
            answer.get()


@graded(1, "split_heads and combine_heads only rearrange their input, so they keep its dtype and values: float64 "
           "stays float64, integers stay integers.", topic="heads-dtype")
@needs("split_heads", "combine_heads", own=("split_heads", "combine_heads"))
def test_heads_keep_the_dtype(student):
    """split and combine keep the input's dtype"""
    for x in (randn(2, 3, 8, seed=5, dtype=torch.float64), torch.arange(48).reshape(2, 3, 8)):
        split = tensor(student.split_heads(x, 2), (2, 2, 3, 4), x.dtype)
        tensor(student.combine_heads(split), (2, 3, 8), x.dtype)


@graded(1, "split_heads and combine_heads only rearrange their input, so they work on any device (checked on "
           "a simulated GPU under the GPU's device rules).", visibility="hidden", topic="device")
@needs("split_heads", "combine_heads", own=("split_heads", "combine_heads"))
def test_heads_work_on_any_device(student):
    """split and combine keep the input's device"""
    split = tensor(student.on_fake_device("split_heads", randn(2, 3, 8, seed=50), 2), (2, 2, 3, 4))
    combined = tensor(student.on_fake_device("combine_heads", randn(2, 2, 3, 4, seed=51)), (2, 3, 8))
    assert device_of(split) == device_of(combined) == "meta", "moved off the input's device"
