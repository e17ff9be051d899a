"""Hidden tests across files: order blindness, position awareness, devices, inputs left unchanged."""

import contextlib

import pytest
import torch

from autograder.lesson_api import NotChecked, StudentError, device_of, graded
from .support import MODULE_PARTS, Calls, Later, close, first, graded_on_its_own, needs, pair, randn, tensor

GROUP = "whole_model"  # what these check: the three files working together, not one of them
PERMUTATION = torch.tensor([4, 2, 0, 5, 1, 3])
MODULE = (*MODULE_PARTS, "MultiHeadAttention")
MASKED = ("scaled_dot_product_attention", "attention mask")
MASKED_MODULE = (*MODULE, "attention mask")
ENCODING = ("get_positional_encoding", "PositionalEncoding")


@graded(3, "Without position information self-attention is permutation-equivariant: reordering the tokens "
           "reorders the outputs the same way and changes nothing else.", topic="order")
@needs(*MODULE)
def test_attention_alone_is_permutation_equivariant(student):
    """Without positional encoding, permuting the input permutes the output"""
    module = student.MultiHeadAttention(8, 2)
    x = randn(2, 6, 8, seed=22)
    out = tensor(module(x), (2, 6, 8))
    close(module(x[:, PERMUTATION]), out[:, PERMUTATION])


@graded(3, "Adding the positional encoding gives the same word different inputs at different positions, so "
           "reordering the words changes the result (attention is no longer order-blind).", topic="position")
@needs(*ENCODING, *MODULE, own=("PositionalEncoding", "MultiHeadAttention"))
def test_positional_encoding_breaks_the_symmetry(student):
    """With positional encoding, permuting the input no longer just permutes the output"""
    encode, attend = student.PositionalEncoding(8, max_seq_len=16), student.MultiHeadAttention(8, 2)
    x, later = randn(2, 6, 8, seed=22), Calls(student)
    encoded = [later(lambda x=x: encode(x)) for x in (x, x[:, PERMUTATION])]  # both before either is read
    # float32 in, whatever the encoding returned: its dtype is the table checks' concern.
    out = tensor(attend(tensor(encoded[0].get(), (2, 6, 8)).float()), (2, 6, 8))
    moved = tensor(attend(tensor(encoded[1].get(), (2, 6, 8)).float()), (2, 6, 8))
    assert (moved - out[:, PERMUTATION]).abs().max() > 1e-3, "still permutation-equivariant"


@graded(3, "Create no tensor on a fixed device inside forward: derive everything from the inputs and the "
           "module's own parameters and buffers, so the code runs on any device (checked on a simulated "
           "GPU under the GPU's device rules: a CPU number such as torch.tensor(-1e9) may join a "
           "GPU computation, a CPU mask may not).", topic="device")
def test_attention_runs_on_any_device(student):
    """Attention works on the input's device"""
    # Real values on the simulated GPU (worker/simulated_gpu.py): code that branches on them runs as on a GPU.
    q, causal3 = randn(2, 2, 3, 4, seed=48), torch.tril(torch.ones(3, 3, dtype=torch.bool))
    # The gates first (inner): a part that fails on its own is charged to itself, not to the mask or the shapes.
    with on_the_cpu_too(student, "sdpa-mask"), first(student, "scaled_dot_product_attention"):
        out, weights = pair(student.on_fake_device("scaled_dot_product_attention", q, q, q, mask=causal3))
    assert device_of(out) == device_of(weights) == "meta", "moved off the input's device"
    x, causal = randn(2, 5, 8, seed=49), torch.tril(torch.ones(5, 5, dtype=torch.bool))
    for mask, topic, gates in ((None, "mha-shapes", MODULE), (causal, "mha-mask", MASKED_MODULE)):
        def check(mask=mask, topic=topic):  # each path may create tensors; the module's own gate first (inner)
            with on_the_cpu_too(student, topic), first(student, "MultiHeadAttention"):
                out, weights = pair(student.MultiHeadAttention(8, 2).on_fake_device(x, mask=mask,
                                                                                    return_weights=True))
            assert device_of(out) == device_of(weights) == "meta", "moved off the module's device"

        graded_on_its_own(student, gates, ("MultiHeadAttention",), check)


@contextlib.contextmanager
def on_the_cpu_too(student, topic):
    """A call on the fake device that fails on the CPU as well is no device problem: it is charged to the concept
    that call checks on the CPU (``topic``), and the feedback names the part."""
    try:
        yield
    except StudentError as error:
        if getattr(error, "on_cpu_too", False):
            raise NotChecked(error.name, topic, "fails on the CPU too (see its own checks)") from error
        raise


@graded(3, "The same modules give the same numbers on the GPU as on the CPU (TF32 off): nothing in them depends "
           "on the device. Checked only where the grading machine has CUDA; elsewhere it counts neither in the "
           "score nor in the maximum.", visibility="hidden", optional=True, topic="device")
def test_gpu_matches_cpu(student):
    """On a GPU, the modules agree with the CPU"""
    if not student.cuda_available():
        pytest.skip("no CUDA on the grading machine")
    # The student's own CPU results are the expectation: correctness is the other checks' business.
    x = randn(2, 6, 16, seed=23)
    module = student.MultiHeadAttention(16, 4)
    on_cpu = tensor(module(x), (2, 6, 16))
    module.to("cuda")
    on_gpu = tensor(module(x, device="cuda"), (2, 6, 16))
    assert device_of(on_gpu) == "cuda", "output not on the GPU"
    close(on_gpu, on_cpu, atol=1e-4)
    encode = student.PositionalEncoding(32, max_seq_len=200)
    table_cpu = tensor(encode(torch.zeros(1, 200, 32)), (1, 200, 32))
    encode.to("cuda")
    close(encode(torch.zeros(1, 200, 32), device="cuda"), table_cpu, atol=1e-4)


@graded(2, "Every function and forward leaves its input tensors unchanged: compute new tensors (x + pe, q * scale, "
           "scores.masked_fill) instead of changing the caller's in place (x += pe, q /= ..., masked_fill_).",
        topic="inputs-unchanged")
def test_inputs_are_left_unchanged(student):
    """Inputs are left unchanged"""
    x, q = randn(2, 5, 8, seed=46), randn(2, 2, 5, 4, seed=47)
    causal = torch.tril(torch.ones(5, 5, dtype=torch.bool))
    calls = (  # (gates, the functions it grades, the call): each call's own gates, so a broken part is charged to itself
        (ENCODING, ("PositionalEncoding",),
         lambda: student.PositionalEncoding(8, max_seq_len=10).forward_reporting_changes(x)),
        (("split_heads",), ("split_heads",), lambda: student.call_reporting_changes("split_heads", x, 2)),
        (("combine_heads",), ("combine_heads",), lambda: student.call_reporting_changes("combine_heads", q)),
        (MASKED, ("scaled_dot_product_attention",),
         lambda: student.call_reporting_changes("scaled_dot_product_attention", q, q * 2, q * 3, mask=causal)),
        (MASKED_MODULE, ("MultiHeadAttention",),
         lambda: student.MultiHeadAttention(8, 2).forward_reporting_changes(x, mask=causal)),
    )
    later = Calls(student)
    answers = [later(call) for _, _, call in calls]  # every call made before any answer is read: one turn
    for (gates, own, call), answer in zip(calls, answers):
        tries = [answer]

        def check(call=call, tries=tries):  # the planned answer first; graded again (stand-ins), called anew
            _, changed = (tries.pop() if tries else Later(call)).get()
            assert not changed, f"changed its input in place: {', '.join(changed)}"

        graded_on_its_own(student, gates, own, check)
