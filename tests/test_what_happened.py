"""What a failed call's feedback says happened, through a real worker: the step that raised.

Each submission is the reference with one edit (``autograder.mutants``), graded by a worker of the strongest
sandbox this machine offers.
"""

import shutil
import tempfile
from pathlib import Path

import pytest
import torch

from autograder.mutants import Edit, Mutant, build
from autograder.remote import BadValue, RemoteSubmission, StudentError
from autograder.sandbox import choose_sandbox
from autograder.submission import read_files
from lesson import CONTRACT, LESSON

# The attention module's softmax output, changed in place: its backward needs it as it was (a real mistake).
IN_PLACE = Edit(file="attention.py", old="    weights = torch.softmax(scores, dim=-1)  # normalise over keys\n",
                new="    weights = torch.softmax(scores, dim=-1)  # normalise over keys\n"
                    "    weights /= weights.sum(dim=-1, keepdim=True)  # in place\n")
# The heads left uncombined: the output projection meets (batch, heads, seq, head_dim) in the forward.
UNCOMBINED = Edit(file="attention.py", old="out = self.out_proj(combine_heads(attended))",
                  new="out = self.out_proj(attended)")
# A forward that returns nothing: there is no tensor to take a gradient of.
NO_OUTPUT = Edit(file="attention.py", old="return (out, weights) if return_weights else out", new="return None")


@pytest.fixture(scope="module")
def factory():
    """One worker factory (a warm zygote where there is one) for every submission here."""
    from autograder.launch import WorkerFactory

    scratch = Path(tempfile.mkdtemp(prefix="mha-pe-wording-"))  # a confined worker's user must pass through
    factory = WorkerFactory(choose_sandbox("auto"), scratch, LESSON)
    try:
        yield factory, scratch
    finally:
        factory.close()
        shutil.rmtree(scratch, ignore_errors=True)


@pytest.fixture
def submit(factory, tmp_path):
    """``submit(*edits)``: a RemoteSubmission of the reference with ``edits`` applied."""
    factory, scratch = factory
    opened = []

    def make(*edits, mutant=None):
        mutant = mutant or Mutant(id="edited", title="edited", edits=edits)
        folder = build(mutant, tmp_path / f"submission-{len(opened)}", LESSON)
        files, _ = read_files(folder, CONTRACT)
        remote = RemoteSubmission(factory.sandbox, factory.launcher(files, scratch), CONTRACT, files=files)
        opened.append(remote)
        return remote, {module: data.decode() for module, data in files.items()}

    yield make
    for remote in opened:
        remote.close()


def line_of(text, fragment):
    """The 1-based line of ``text`` holding ``fragment``."""
    return text[: text.index(fragment)].count("\n") + 1


def test_a_forward_that_raises_during_a_gradient_request_is_named_forward(submit):
    remote, files = submit(UNCOMBINED)
    module = remote.MultiHeadAttention(8, 2)
    with pytest.raises(StudentError) as caught:
        module.grads(torch.ones(2, 4, 8))
    error = caught.value
    line = line_of(files["attention"], "out = self.out_proj(attended)")
    assert error.phase == "forward"
    assert error.summary == f"MultiHeadAttention.forward raised RuntimeError at attention.py:{line}"


def test_a_backward_that_raises_is_named_backward(submit):
    remote, _ = submit(IN_PLACE)
    module = remote.MultiHeadAttention(8, 2)
    assert module(torch.ones(2, 4, 8)).shape == (2, 4, 8)  # the forward itself runs
    with pytest.raises(StudentError) as caught:
        module.grads(torch.ones(2, 4, 8))
    assert caught.value.phase == "backward"
    assert caught.value.summary.startswith("MultiHeadAttention.backward raised RuntimeError")
    assert ".forward" not in caught.value.summary


def test_a_forward_that_returns_no_tensor_is_named_forward(submit):
    remote, _ = submit(NO_OUTPUT)
    with pytest.raises(BadValue) as caught:
        remote.MultiHeadAttention(8, 2).grads(torch.ones(2, 4, 8))
    assert caught.value.summary.startswith("MultiHeadAttention.forward returned no tensor")

