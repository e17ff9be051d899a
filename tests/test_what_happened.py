"""What a failed call's feedback says happened, through a real worker: the step that raised, and the error the
student would meet on their own machine.

Each submission is the reference with one edit (``autograder.lesson.catalogue``), graded by a worker of the strongest
sandbox this machine offers.
"""

import re

import pytest
import torch

from autograder.lesson.catalogue import Edit, Mutant, build, load_catalogue
from autograder.judge.failures import BadValue, StudentError
from autograder.worker.protocol import device_of
from autograder.intake.submission import read_files
from lesson import CATALOGUE, CONTRACT, LESSON
from workers import remote_over, worker_factory

# The attention module's softmax output, changed in place: its backward needs it as it was (a real mistake).
IN_PLACE = Edit(file="attention.py", old="    weights = torch.softmax(scores, dim=-1)  # normalise over keys\n",
                new="    weights = torch.softmax(scores, dim=-1)  # normalise over keys\n"
                    "    weights /= weights.sum(dim=-1, keepdim=True)  # in place\n")
# The heads left uncombined: the output projection meets (batch, heads, seq, head_dim) in the forward.
UNCOMBINED = Edit(file="attention.py", old="out = self.out_proj(combine_heads(attended))",
                  new="out = self.out_proj(attended)")
# A forward that returns nothing: there is no tensor to take a gradient of.
NO_OUTPUT = Edit(file="attention.py", old="return (out, weights) if return_weights else out", new="return None")
# A value read from the tensor: a meta tensor has none (NotImplementedError), the CPU's list is one short
# (IndexError, what the student sees).
PAST_THE_END = Edit(file="heads.py", old="    d_model = x.shape[-1]\n",
                    new="    rows = x.tolist()\n    last = rows[len(rows)]\n    d_model = x.shape[-1]\n")
# A number read from the tensor: the simulated GPU holds values, so it runs there as on the CPU (and a GPU).
READS_A_VALUE = Edit(file="heads.py", old="    d_model = x.shape[-1]\n",
                     new="    total = float(x.sum())\n    d_model = x.shape[-1]\n")
# A GPU tensor handed to numpy: a GPU refuses it (TypeError), the CPU runs it.
TO_NUMPY = Edit(file="heads.py", old="    d_model = x.shape[-1]\n",
                new="    total = x.numpy().sum()\n    d_model = x.shape[-1]\n")
PLACE = re.compile(r" at (\w+)\.py:(\d+)")


@pytest.fixture(scope="module")
def factory():
    """One worker factory (a warm zygote where there is one) for every submission here."""
    with worker_factory("mha-pe-wording-") as made:
        yield made


@pytest.fixture
def submit(factory, tmp_path):
    """``submit(*edits)``: a RemoteSubmission of the reference with ``edits`` applied (or a catalogued bug's)."""
    factory, scratch = factory
    opened = []

    def make(*edits, mutant=None):
        mutant = mutant or Mutant(id="edited", title="edited", edits=edits)
        folder = build(mutant, tmp_path / f"submission-{len(opened)}", LESSON)
        files, _ = read_files(folder, CONTRACT)
        remote = remote_over((factory, scratch), folder)
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


def test_a_fake_device_call_that_fails_on_the_cpu_too_reports_the_cpus_error(submit):
    remote, files = submit(PAST_THE_END)
    with pytest.raises(StudentError) as caught:
        remote.on_fake_device("split_heads", torch.empty(2, 3, 8, device="meta"), 2)
    error = caught.value
    line = line_of(files["heads"], "last = rows[len(rows)]")
    assert error.on_fake_device and error.on_cpu_too and not error.mixed_devices
    assert error.type == "IndexError" and error.is_a("LookupError")  # the meta run's was NotImplementedError
    assert error.summary == (f"split_heads raised IndexError at heads.py:{line} on the CPU too "
                             "(not a device problem)")
    assert "list index" in error.detail and "list index" not in error.summary  # the message: instructor only


def test_a_device_mismatch_is_the_gpus_runtime_error_and_said_to_run_on_the_cpu(submit):
    bug = next(entry for entry in load_catalogue(CATALOGUE / "bugs.toml", "bug")
               if entry.id == "mha-default-mask-on-cpu")
    remote, files = submit(mutant=bug)
    module = remote.MultiHeadAttention(8, 2)
    assert module(torch.ones(2, 5, 8)).shape == (2, 5, 8)  # on the CPU it runs
    with pytest.raises(StudentError) as caught:
        module.on_fake_device(torch.empty(2, 5, 8, device="meta"))
    error = caught.value
    assert error.on_fake_device and not error.on_cpu_too and error.mixed_devices
    assert error.type == "RuntimeError" and error.mro[0] == "RuntimeError"
    (where,) = PLACE.findall(error.summary)
    assert where[0] == "attention" and "masked_fill" in files["attention"].splitlines()[int(where[1]) - 1]
    assert error.summary == (f"MultiHeadAttention.forward raised RuntimeError at attention.py:{where[1]} under the "
                             "GPU's device rules, mixing tensors of two devices (it runs on the CPU)")


def test_a_failure_of_the_simulated_gpu_alone_is_said_to_run_on_the_cpu(submit):
    remote, files = submit(TO_NUMPY)
    with pytest.raises(StudentError) as caught:
        remote.on_fake_device("split_heads", torch.ones(2, 3, 8), 2)
    error = caught.value
    line = line_of(files["heads"], "total = x.numpy().sum()")
    assert error.on_fake_device and not error.on_cpu_too and not error.mixed_devices
    assert error.summary == (f"split_heads raised TypeError at heads.py:{line} under the GPU's device rules "
                             "(it runs on the CPU)")


def test_a_value_read_on_the_simulated_gpu_runs_as_on_a_gpu(submit):
    """The meta device, which the device checks used to run on, has no values: reading one failed there."""
    remote, _ = submit(READS_A_VALUE)
    split = remote.on_fake_device("split_heads", torch.ones(2, 3, 8), 2)
    assert device_of(split) == "meta" and tuple(split.shape) == (2, 2, 3, 4)


def test_the_feedback_of_a_device_check_says_the_code_runs_on_the_cpu(factory, tmp_path):
    """Through the judge: the device check's "What happened" line is the wording above, in the student's feedback."""
    from autograder.judge.grade import Judge

    factory, scratch = factory
    bug = next(entry for entry in load_catalogue(CATALOGUE / "bugs.toml", "bug")
               if entry.id == "mha-default-mask-on-cpu")
    files, problems = read_files(build(bug, tmp_path / "bug", LESSON), CONTRACT)
    result = Judge(LESSON).grade("bug", files, problems, factory.sandbox, factory.launcher(files, scratch))
    (check,) = [test for test in result.tests if test.id == "test_attention_runs_on_any_device"]
    assert check.status == "failed" and check.visibility == "visible"
    assert "What happened: MultiHeadAttention.forward raised RuntimeError at attention.py:" in check.output
    assert check.output.endswith("under the GPU's device rules, mixing tensors of two devices (it runs on the CPU)")
