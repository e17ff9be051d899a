"""Small pieces of the engine: the forbidden-API scan, result records, file names."""

import pytest

from autograder.forbidden import scan_module
from autograder.results import SubmissionResult, TestResult
from autograder.submission import read_files, safe_name


def test_the_scan_finds_forbidden_calls_and_where_they_are():
    source = """
import torch
import torch.nn.functional as F
from torch.nn import MultiheadAttention as MHA

def scaled_dot_product_attention(q, k, v, mask=None):
    return F.scaled_dot_product_attention(q, k, v), None

class MultiHeadAttention(torch.nn.Module):
    def __init__(self, d, h):
        self.inner = MHA(d, h)
"""
    found = scan_module(source, "attention")
    assert found == {"scaled_dot_product_attention": {"torch.nn.functional.scaled_dot_product_attention"},
                     "MultiHeadAttention": {"torch.nn.MultiheadAttention"}}


def test_the_scan_leaves_honest_code_and_names_alone():
    source = """
import torch
from .heads import split_heads

def scaled_dot_product_attention(q, k, v, mask=None):
    '''Unlike torch.nn.functional.scaled_dot_product_attention, this returns the weights.'''
    return torch.softmax(q @ k.transpose(-2, -1), -1) @ v, None

class MultiHeadAttention(torch.nn.Module):
    def forward(self, x):
        return scaled_dot_product_attention(x, x, x)
"""
    assert scan_module(source, "attention") == {}


def test_getattr_tricks_are_caught():
    source = "import torch\ndef scaled_dot_product_attention(q, k, v, mask=None):\n" \
             "    return getattr(torch.nn.functional, 'scaled_dot_product_attention')(q, k, v), None\n"
    assert scan_module(source, "attention")


def test_results_round_trip_through_json():
    result = SubmissionResult("ünï", (TestResult("a", "heads", 2, 3, "failed", "why", "hidden", "test_a"),),
                              1.5, "out", "bwrap", "abc", ("note",), {"student_output": "hi"})
    again = SubmissionResult.from_json(result.to_json())
    assert again == result and again.score == 2 and again.max_score == 3


@pytest.mark.parametrize("student", ["alice", "a b", "..", ".hidden", "-rf", "ünï/x", "a\nb"])
def test_safe_names_are_plain_file_names(student):
    name = safe_name(student)
    assert "/" not in name and "\n" not in name and not name.startswith((".", "-")) and name not in ("", "..")


def test_safe_names_do_not_collide():
    students = ["a b", "a%20b", "A B", ".x", "%2Ex", "-x", "%2Dx"]
    assert len({safe_name(student) for student in students}) == len(students)


def test_oversized_and_linked_files_are_refused(tmp_path):
    (tmp_path / "heads.py").write_bytes(b"x" * (2 << 20))
    (tmp_path / "attention.py").symlink_to("/etc/passwd")
    (tmp_path / "positional_encoding.py").write_text("ok = 1\n")
    files, problems = read_files(tmp_path)
    assert set(files) == {"positional_encoding"}
    assert "larger than" in problems["heads"] and "not a regular file" in problems["attention"]


def test_a_worker_is_stopped_through_a_handle_that_outlives_it():
    """The zygote's stop handler may run after the worker was reaped; it must neither fail nor hit another pid."""
    import os
    import signal
    import time

    from autograder.worker.zygote import _kill_quietly

    ended = os.fork()
    if ended == 0:
        os._exit(0)
    handle = os.pidfd_open(ended)
    os.waitpid(ended, 0)
    _kill_quietly(handle)  # a bare os.kill(pid) would raise ProcessLookupError here, or kill a newcomer
    os.close(handle)

    running = os.fork()
    if running == 0:
        time.sleep(60)
        os._exit(0)
    handle = os.pidfd_open(running)
    _kill_quietly(handle)
    _, status = os.waitpid(running, 0)
    os.close(handle)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL


def test_plain_strings_equal_to_a_contract_name_are_not_uses():
    """``__all__`` lists the contract's own scaled_dot_product_attention, which shares the forbidden API's name."""
    source = '''
import torch

__all__ = ["MultiHeadAttention", "scaled_dot_product_attention"]
NAMES = ("scaled_dot_product_attention", "MultiheadAttention")

def scaled_dot_product_attention(q, k, v, mask=None):
    print("scaled_dot_product_attention")
    return torch.softmax(q @ k.transpose(-2, -1), -1) @ v, None
'''
    assert scan_module(source, "attention") == {}


@pytest.mark.parametrize("lookup", ['vars(F)["scaled_dot_product_attention"]',
                                    'F.__dict__.get("scaled_dot_product_attention")',
                                    'operator.attrgetter("scaled_dot_product_attention")(F)'])
def test_names_looked_up_as_strings_are_caught(lookup):
    source = ("import operator\nimport torch.nn.functional as F\n"
              f"def scaled_dot_product_attention(q, k, v, mask=None):\n    return {lookup}(q, k, v), None\n")
    assert scan_module(source, "attention") == {
        "scaled_dot_product_attention": {"torch.nn.functional.scaled_dot_product_attention"}}


def test_a_check_not_run_here_counts_nowhere_and_says_so():
    """The GPU check on a machine without CUDA: 0 of 0, no pass rate, not a thing to work on."""
    from autograder.reports import class_report, feedback

    gpu = TestResult("On a GPU", "properties", 0, 0, "skipped", "Not counted here: no CUDA.", "hidden", "test_gpu")
    other = TestResult("a", "heads", 2, 2, "passed", "", "visible", "test_a")
    result = SubmissionResult("ünï", (other, gpu))
    record = result.to_json()
    assert "status" not in record["tests"][1] and record["tests"][1]["extra_data"]["counted"] is False
    assert SubmissionResult.from_json(record) == result and (result.score, result.max_score) == (2, 2)
    text = feedback.render(result)
    assert "To work on" not in text and "count neither in your score nor in the maximum" in text
    assert [name for name, _, _ in class_report.pass_rates([result])] == ["a"]


def test_the_fake_device_applies_the_gpus_device_rules():
    """A CPU 0-dim tensor may join a computation on another device (CUDA allows it; meta alone refuses it); any
    other CPU tensor may not; a module's registered state moves with it, a plain tensor attribute does not."""
    import torch

    from autograder.worker.session import on_fake_device

    scores, mask = torch.empty(2, 3, 3, device="meta"), torch.empty(3, 3, dtype=torch.bool, device="meta")
    with pytest.raises(RuntimeError):
        scores.masked_fill(~mask, torch.tensor(float("-inf")))  # plain meta: what the check used to run on
    filled = on_fake_device(lambda s, m: s.masked_fill(~m, torch.tensor(float("-inf"))), (scores, mask), {})
    assert filled["devices"] == ["meta"] and filled["value"].shape == (2, 3, 3)
    with pytest.raises(RuntimeError, match="device"):
        on_fake_device(lambda s: s.masked_fill(torch.ones(3, 3, dtype=torch.bool), 0.0), (scores,), {})

    class Table(torch.nn.Module):
        def __init__(self, persistent):
            super().__init__()
            self.register_buffer("pe", torch.zeros(5, 4), persistent=persistent)
            self.plain = torch.zeros(5, 4)

        def forward(self, x, plain=False):
            return x + (self.plain if plain else self.pe)

    for persistent in (True, False):
        assert on_fake_device(Table(persistent), (torch.empty(2, 5, 4, device="meta"),), {})["devices"] == ["meta"]
    with pytest.raises(RuntimeError, match="device"):
        on_fake_device(Table(True), (torch.empty(2, 5, 4, device="meta"),), {"plain": True})
