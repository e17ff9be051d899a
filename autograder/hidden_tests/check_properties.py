"""Hidden tests across files: order blindness, position awareness, devices."""

import pytest
import torch

from autograder.rubric import graded
from autograder.hidden_tests.support import close, module_and_twin, pair, randn, tensor
from autograder.worker.protocol import device_of

GROUP = "properties"
PERMUTATION = torch.tensor([4, 2, 0, 5, 1, 3])


@graded(3, "Without position information self-attention is permutation-equivariant: reordering the tokens "
           "reorders the outputs the same way and changes nothing else.")
def test_attention_alone_is_permutation_equivariant(student):
    """Without positional encoding, permuting the input permutes the output"""
    module = student.MultiHeadAttention(8, 2)
    x = randn(2, 6, 8, seed=22)
    out = tensor(module(x), (2, 6, 8))
    close(module(x[:, PERMUTATION]), out[:, PERMUTATION])


@graded(3, "Adding the positional encoding gives the same word different inputs at different positions, so "
           "reordering the words changes the result (attention is no longer order-blind).")
def test_positional_encoding_breaks_the_symmetry(student):
    """With positional encoding, permuting the input no longer just permutes the output"""
    encode, attend = student.PositionalEncoding(8, max_seq_len=16), student.MultiHeadAttention(8, 2)
    x = randn(2, 6, 8, seed=22)
    out = tensor(attend(tensor(encode(x), (2, 6, 8))), (2, 6, 8))
    moved = tensor(attend(tensor(encode(x[:, PERMUTATION]), (2, 6, 8))), (2, 6, 8))
    assert (moved - out[:, PERMUTATION]).abs().max() > 1e-3, "still permutation-equivariant"


@graded(3, "Create no tensor on a fixed device inside forward: derive everything from the inputs and the "
           "module's own parameters and buffers, so the code runs on any device (checked on PyTorch's meta "
           "device).", visibility="hidden")
def test_attention_runs_on_any_device(student):
    """Attention works on the input's device"""
    q = torch.empty(2, 3, 4, device="meta")
    out, weights = pair(student.scaled_dot_product_attention(q, q, q))
    assert device_of(out) == device_of(weights) == "meta", "moved off the input's device"
    module = student.MultiHeadAttention(8, 2).to("meta")
    out, weights = pair(module(torch.empty(2, 5, 8, device="meta"), return_weights=True))
    assert tuple(out.shape) == (2, 5, 8) and tuple(weights.shape) == (2, 2, 5, 5), "wrong shapes"
    assert device_of(out) == "meta", "moved off the module's device"


@graded(3, "The same modules must give the same numbers on the GPU as on the CPU (TF32 off). Where the grading "
           "machine has no CUDA, only the CPU half is checked, so a correct submission's total never depends on "
           "the machine.", visibility="hidden", award_if_skipped=True)
def test_gpu_matches_cpu(student, reference):
    """On a GPU, the modules agree with the CPU"""
    x = randn(2, 6, 16, seed=23)
    module, twin = module_and_twin(student, 16, 4)
    with torch.no_grad():
        expected, _ = twin(x, x, x, need_weights=False)
    on_cpu = tensor(module(x), (2, 6, 16))
    close(on_cpu, expected)
    table = tensor(student.get_positional_encoding(200, 32), (200, 32))
    close(table, reference.get_positional_encoding(200, 32), atol=1e-4)
    if not student.cuda_available():
        pytest.skip("no CUDA on the grading machine; the CPU half passed")
    module.to("cuda")
    on_gpu = tensor(module(x, device="cuda"), (2, 6, 16))
    assert device_of(on_gpu) == "cuda", "output not on the GPU"
    close(on_gpu, on_cpu, atol=1e-4)
    encode = student.PositionalEncoding(32, max_seq_len=200).to("cuda")
    close(encode(torch.zeros(1, 200, 32), device="cuda")[0], table, atol=1e-4)
