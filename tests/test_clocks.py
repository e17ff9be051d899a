"""No point depends on wall-clock time: limits count the worker's CPU, read by the judge from /proc.

The backstop's three outcomes are decided here on injected readings and an injected clock (no assertion waits
on the wall clock); the real workers then show a sleeping call and a CPU-burning call charged, and the "no Python
loop" check passing the reference and failing every loop, hidden or not, while busy loops load every core.
"""

import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from autograder.sandbox import clocks
from autograder.commands import judge_loop
from autograder.judge.grade import Judge
from autograder.lesson.catalogue import copy_package, load_catalogue
from autograder.commands.planning import Task
from autograder.lesson.reference import load_reference
from autograder.judge.remote import RemoteSubmission
from autograder.judge.failures import CallTimeout, MachineBusy, SubmissionFailure
from autograder.records.results import GraderFailure
from autograder.sandbox.isolation import Limits, choose_sandbox
from autograder.intake.submission import read_files
from lesson import CATALOGUE, CONTRACT, LESSON, MODULES, SOLUTIONS
from workers import remote_over, worker_factory

# ------------------------------------------------------------------ the backstop, on injected readings


class _Output:
    def text(self):
        return ""


class FakeWorker:
    """A worker that never replies; ``rates`` give its CPU, run-queue wait (per wall second) and state."""

    hello = {"ready": True, "cuda": False}
    cpu_start = last_cpu = 0.0

    def __init__(self, clock, cpu_rate, wait_rate, runnable):
        self.clock, self.cpu_rate, self.wait_rate, self.runnable = clock, cpu_rate, wait_rate, runnable
        self.imported, self.output, self.closed = set(), _Output(), False

    def ready(self, deadline):
        return self.hello

    def cpu_mark(self):
        return self.cpu_rate * self.clock.now

    def usage(self):
        return clocks.Usage(self.cpu_rate * self.clock.now, self.wait_rate * self.clock.now, self.runnable,
                            not self.closed)

    def send(self, message, blobs, deadline):
        return "nonce"

    def replied(self, seconds):
        self.clock.now += max(seconds, 0.0)  # time passes only on the injected clock
        return False

    def receive(self, nonce, deadline, max_reply=0):
        raise AssertionError("never replies")

    def exit_detail(self):
        return "killed"

    def close(self):
        self.closed = True


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def _remote(cpu_rate, wait_rate, runnable, call_seconds=5.0):
    clock = FakeClock()
    sandbox = choose_sandbox("none", limits=Limits(call_seconds=call_seconds, submission_seconds=100.0))
    workers = []

    def launch():
        workers.append(FakeWorker(clock, cpu_rate, wait_rate, runnable))
        return workers[-1]

    remote = RemoteSubmission(sandbox, launch, CONTRACT)
    remote.clock, remote.deadline = clock, 1e9
    return remote, clock, workers


def test_a_call_that_computes_past_its_cpu_limit_is_charged_as_cpu():
    remote, clock, workers = _remote(cpu_rate=1.0, wait_rate=0.0, runnable=True)
    with pytest.raises(CallTimeout) as caught:
        remote.split_heads(torch.zeros(1, 2, 4), 2)
    assert "used more than 5 s of CPU time" in caught.value.summary and not caught.value.asleep
    assert 5.0 <= clock.now < 6.0 and workers[0].closed and not remote.busy


def test_a_call_that_sleeps_is_charged_as_waiting_without_computing():
    remote, clock, workers = _remote(cpu_rate=0.0, wait_rate=0.0, runnable=False)
    with pytest.raises(CallTimeout) as caught:
        remote.split_heads(torch.zeros(1, 2, 4), 2)
    assert "waited without computing (a sleep or a blocking call)" in caught.value.summary and caught.value.asleep
    assert clock.now < 6.0, "a sleeper is stopped at its limit, not at the backstop: it does not stall the class"
    assert not remote.busy
    with pytest.raises(CallTimeout):  # its name fails fast afterwards
        remote.split_heads(torch.zeros(1, 2, 4), 2)


def test_a_call_starved_of_cpu_is_the_machines_fault_and_charges_nothing():
    remote, clock, workers = _remote(cpu_rate=0.05, wait_rate=0.9, runnable=True)
    with pytest.raises(MachineBusy):
        remote.split_heads(torch.zeros(1, 2, 4), 2)
    assert clock.now >= 4 * 5.0, "only the wall-clock backstop decides a starved call"
    assert remote.busy and workers[0].closed
    with pytest.raises(MachineBusy):  # every later call stops at once: the whole student is graded again
        remote.combine_heads(torch.zeros(1, 2, 2, 2))
    assert len(workers) == 1


def test_without_run_queue_figures_the_threads_state_decides():
    starved = clocks.Samples()
    starved.add(1.0, 0.0, 0.0, True)
    asleep = clocks.Samples()
    asleep.add(1.0, 0.0, 0.0, False)
    assert not starved.mostly_asleep and not asleep.mostly_starved and asleep.mostly_asleep
    computing = clocks.Samples()
    computing.add(1.0, 0.9, 0.0, True)
    assert not computing.mostly_asleep and not computing.mostly_starved


def test_a_worker_that_lowers_its_own_priority_is_never_runnable_for_the_judge():
    """A submission that nices itself (or goes SCHED_IDLE) waits by its own choice: that must not read as a busy
    machine, or it could buy retries."""
    spin = "import os, sys; os.nice(int(sys.argv[1])); print(flush=True)\nwhile True: pass"
    normal = subprocess.Popen([sys.executable, "-c", spin, "0"], stdout=subprocess.PIPE)
    niced = subprocess.Popen([sys.executable, "-c", spin, "5"], stdout=subprocess.PIPE)
    try:
        for process in (normal, niced):  # each says when it is about to spin (read, never timed)
            process.stdout.readline()
        assert not clocks.usage([niced.pid], nice=0).runnable
        assert clocks.usage([normal.pid], nice=0).runnable  # a spinning process is always running or runnable
    finally:
        for process in (normal, niced):
            process.kill()
            process.wait()
            process.stdout.close()


def test_machine_busy_is_retried_a_bounded_number_of_times_then_says_the_student_needs_grading(tmp_path,
                                                                                               monkeypatch):
    calls = []

    def busy(prepared, sandbox, judge, out_dir=None):
        calls.append(prepared.task.student)
        return judge_loop.failed_result(prepared.task, sandbox, GraderFailure("machine_busy", "waited for a CPU"))

    monkeypatch.setattr(judge_loop, "grade_prepared", busy)
    copy_package(SOLUTIONS, tmp_path / "class" / "alice", MODULES)
    done = []
    task = Task("alice", str(tmp_path / "class" / "alice"), "fp")
    judge_loop.judge_loop([task], choose_sandbox("auto"), tmp_path / "out", done.append, LESSON)
    assert calls == ["alice"] * (1 + judge_loop.RETRIES)
    result = done[0]
    assert result.tests == () and result.score == 0 and result.unfinished.kind == "machine_busy"
    assert "still needs grading" in result.notes[-1]
    assert judge_loop.needs_retry(result)


def test_a_busy_judge_returns_an_unfinished_result_with_no_test_charged(monkeypatch):
    judge = Judge(LESSON)

    def starved(self, submission):
        submission.busy = "a call waited 80 s for a CPU"
        return [], [], {}

    monkeypatch.setattr(Judge, "run_hidden_tests", starved)
    files, _ = read_files(SOLUTIONS, CONTRACT)
    result = judge.grade("alice", files, {}, choose_sandbox("none"), lambda: None)
    assert result.tests == () and result.unfinished.kind == "machine_busy" and judge_loop.needs_retry(result)


# ------------------------------------------------------------------ real workers


@pytest.fixture
def busy_machine():
    """Three busy loops per core for the test's duration (ended by their own pids)."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(3 * (os.cpu_count() or 1))]
    try:
        yield loops
    finally:
        for loop in loops:
            loop.send_signal(signal.SIGKILL)
            loop.wait()


@pytest.fixture(scope="module")
def factory():
    with worker_factory("clocks-", call_seconds=2.0) as made:
        yield made


def _edited(tmp_path, name, old, new):
    folder = copy_package(SOLUTIONS, tmp_path / name, MODULES)
    path = folder / "positional_encoding.py"
    source = path.read_text()
    assert old in source
    path.write_text(source.replace(old, new, 1))
    return folder


FIRST_LINE = "    if max_seq_len < 1:"


def test_a_sleeping_call_gets_nothing_and_the_next_call_still_works(tmp_path, factory):
    folder = _edited(tmp_path, "sleeper", FIRST_LINE, "    import time; time.sleep(10_000)\n" + FIRST_LINE)
    remote = remote_over(factory, folder)
    try:
        with pytest.raises(CallTimeout) as caught:
            remote.get_positional_encoding(4, 8)
        assert "waited without computing" in caught.value.summary and not remote.busy
        assert tuple(remote.split_heads(torch.zeros(1, 2, 4), 2).shape) == (1, 2, 2, 2)
    finally:
        remote.close()


def test_a_cpu_burning_call_is_charged(tmp_path, factory):
    folder = _edited(tmp_path, "burner", FIRST_LINE, "    while True:\n        pass\n" + FIRST_LINE)
    remote = remote_over(factory, folder)
    try:
        with pytest.raises(CallTimeout) as caught:
            remote.get_positional_encoding(4, 8)
        assert "used more than 2 s of CPU time" in caught.value.summary and not remote.busy
    finally:
        remote.close()


# The lesson's loop, hidden in the ways a submission might try (each a replacement of the table's computation).
LOOP = """
    def _loop(max_seq_len, d_model, base):
        rows = []
        for pos in range(max_seq_len):
            row = []
            for i in range(0, d_model, 2):
                angle = pos / base ** (i / d_model)
                row += [math.sin(angle), math.cos(angle)]
            rows.append(row)
        return rows
"""
HIDDEN_LOOPS = {
    "loop-in-a-thread": """
    import threading
    out = {}
    worker = threading.Thread(target=lambda: out.update(rows=_loop(max_seq_len, d_model, base)))
    worker.start()
    worker.join()
    return torch.tensor(out["rows"], dtype=torch.float32)""",
    "loop-in-a-child-process": """
    import os, pickle
    read, write = os.pipe()
    if os.fork() == 0:
        os.write(write, pickle.dumps(_loop(max_seq_len, d_model, base)))
        os._exit(0)
    os.close(write)
    data = b""
    while chunk := os.read(read, 1 << 20):
        data += chunk
    return torch.tensor(pickle.loads(data), dtype=torch.float32)""",
    # Keeps the rows it made for each base and loops only over the rows no earlier call made.
    "rows-kept-between-calls": """
    rows = globals().setdefault("_KEPT", {}).setdefault((d_model, float(base)), [])
    for pos in range(len(rows), max_seq_len):
        row = []
        for i in range(0, d_model, 2):
            angle = pos / base ** (i / d_model)
            row += [math.sin(angle), math.cos(angle)]
        rows.append(row)
    return torch.tensor(rows[:max_seq_len], dtype=torch.float32)""",
    # Builds the longest table the check draws on the first call with a base (a small one, unmeasured) and slices.
    "longest-table-made-ahead": """
    made = globals().setdefault("_AHEAD", {})
    if (d_model, float(base)) not in made:
        made[(d_model, float(base))] = torch.tensor(_loop(13_000, d_model, base), dtype=torch.float32)
    if max_seq_len <= 13_000:
        return made[(d_model, float(base))][:max_seq_len].clone()
    return torch.tensor(_loop(max_seq_len, d_model, base), dtype=torch.float32)""",
}
# The check's arguments are drawn under the judge's secret: a submission that prepares tables at import for the
# arguments it guesses (here: what a draw seeded without the secret would give) gains nothing.
PRECOMPUTED = """

_READY = {}
import random as _random
_guess = _random.Random(0)
for _args in [(_guess.randrange(9_750, 13_000), 32, _guess.uniform(5e3, 2e4)), (10_000, 32, 9_000.0)]:
    _READY[_args] = torch.tensor(_loop_at_import(*_args), dtype=torch.float32)
"""


def _loop_folder(tmp_path, name, body):
    folder = copy_package(SOLUTIONS, tmp_path / name, MODULES)
    path = folder / "positional_encoding.py"
    source = path.read_text()
    start = source.index("    position = torch.arange(max_seq_len, dtype=torch.float64)")
    end = source.index("    return pe.flatten(1)  # (seq, d_model)") + len("    return pe.flatten(1)  # (seq, d_model)")
    source = source[:start] + LOOP + body + source[end:]
    path.write_text(source)
    return folder


def _precomputed_folder(tmp_path):
    folder = _loop_folder(tmp_path, "precomputed-at-import", """
    cached = _READY.get((max_seq_len, d_model, float(base)))
    if cached is not None:
        return cached.clone()
    return torch.tensor(_loop(max_seq_len, d_model, base), dtype=torch.float32)""")
    path = folder / "positional_encoding.py"
    helper = "\n\ndef _loop_at_import" + LOOP.split("def _loop", 1)[1].replace("\n    ", "\n")
    path.write_text(path.read_text() + helper + PRECOMPUTED)
    return folder


def _vectorized_check():
    from autograder.lessons.mha_pe.hidden_tests import check_positional_encoding

    return check_positional_encoding.test_table_is_vectorized


def _passes(factory, folder):
    remote = remote_over(factory, folder)
    try:
        _vectorized_check()(remote, load_reference(LESSON))
        return True
    except (AssertionError, SubmissionFailure):  # a loop may even run past the call's CPU limit
        return False
    finally:
        remote.close()


def _torch_threads(count):
    threads = torch.get_num_threads()
    torch.set_num_threads(count)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def one_thread():
    """torch in one thread, as in every judge (judge_loop.judge_loop)."""
    yield from _torch_threads(1)


@pytest.fixture
def two_threads():
    """The calling process's torch on two threads, as in a test run or an instructor's notebook: the check must
    measure its yardstick the same way whatever the caller set (spinning thread pools inflate CPU time)."""
    yield from _torch_threads(2)


@pytest.fixture
def fresh_yardstick():
    """The yardstick measured again inside the test, beside its busy loops (the check keeps one per process)."""
    from autograder.lessons.mha_pe.hidden_tests import check_positional_encoding

    kept = list(check_positional_encoding._YARDSTICK)
    check_positional_encoding._YARDSTICK.clear()
    yield
    check_positional_encoding._YARDSTICK[:] = kept


def test_the_vectorized_check_measures_work_under_load(tmp_path, factory, two_threads, busy_machine, fresh_yardstick):
    hostile = {entry.id: entry for entry in load_catalogue(CATALOGUE / "hostile.toml", "hostile")}
    variants = {entry.id: entry for entry in load_catalogue(CATALOGUE / "variants.toml", "variant")}
    from autograder.lesson.catalogue import build

    assert _passes(factory, SOLUTIONS), "the reference is vectorized"
    assert _passes(factory, build(variants["pe-float32-pow"], tmp_path / "float32", LESSON))
    assert not _passes(factory, build(hostile["lru-cached-loop"], tmp_path / "lru", LESSON))
    assert not _passes(factory, build(hostile["fast-wrong-when-large"], tmp_path / "zeros", LESSON))
    assert not _passes(factory, build(variants["pe-article-loops"], tmp_path / "article", LESSON))
    for name, body in HIDDEN_LOOPS.items():
        assert not _passes(factory, _loop_folder(tmp_path, name, body)), name
    assert not _passes(factory, _precomputed_folder(tmp_path)), "work done at import is counted"


def test_the_whole_submissions_backstop_charges_a_sleeper_and_spares_a_starved_one():
    from autograder.judge.failures import SubmissionTimeout

    remote, clock, _ = _remote(cpu_rate=0.0, wait_rate=0.0, runnable=False)
    remote.deadline = 0.0
    with pytest.raises(SubmissionTimeout) as caught:
        remote.split_heads(torch.zeros(1, 2, 4), 2)
    assert "waited without computing" in caught.value.summary and not remote.busy
    remote, clock, _ = _remote(cpu_rate=0.0, wait_rate=0.0, runnable=False)
    remote.deadline = 0.0
    remote.samples.add(100.0, 1.0, 90.0, True)  # what its earlier long calls were made of
    with pytest.raises(MachineBusy):
        remote.split_heads(torch.zeros(1, 2, 4), 2)


def test_a_checks_draw_is_the_submissions_own_and_needs_the_judges_secret(monkeypatch):
    """The same files draw the same arguments on every run (a pure function of the submission); other files, or
    the same files under another key, draw others: no submission can compute its draw without the judge's key."""
    files = {module: (SOLUTIONS / f"{module}.py").read_bytes() for module in MODULES}
    sandbox = choose_sandbox("none", unisolated_ok=True)

    def draws(files, key):
        monkeypatch.setenv("AUTOGRADER_SEAL_KEY", key)
        remote = RemoteSubmission(sandbox, lambda: None, CONTRACT, files=files)
        return [remote.draw("pe-vectorized").random() for _ in range(2)] + [remote.draw("other").random()]

    first = draws(files, "k" * 32)
    assert first == draws(files, "k" * 32)
    assert first[0] == first[1] != first[2]  # one sequence per label
    assert draws(files, "j" * 32) != first
    changed = dict(files, **{MODULES[0]: files[MODULES[0]] + b"\n# a comment\n"})
    assert draws(changed, "k" * 32) != first


def test_a_tree_read_from_its_root_down_is_the_tree_read_from_every_parent(monkeypatch):
    """Where the kernel lists each task's children the tree is read from its root down; elsewhere from every
    process's parent. Both find the same processes (a child and a grandchild here)."""
    script = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); " \
             "print('ready', flush=True); time.sleep(60)"
    root = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    try:
        assert root.stdout.readline() == b"ready\n"
        from_parents = clocks.tree(root.pid, clocks.parents())
        assert len(from_parents) == 2 and from_parents[0] == root.pid
        if not clocks._children_files():
            pytest.skip("this kernel lists no children files: only the scan of every parent is used")
        assert sorted(clocks.tree(root.pid)) == sorted(from_parents)
        assert clocks.children(root.pid) == sorted(set(from_parents) - {root.pid})
        monkeypatch.setattr(clocks, "_children_files", lambda: False)
        assert sorted(clocks.tree(root.pid)) == sorted(from_parents)
        assert clocks.children(root.pid) == sorted(set(from_parents) - {root.pid})
    finally:
        for pid in reversed(clocks.tree(root.pid, clocks.parents())):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        root.wait()


BURN = """
import sys, threading, time

def burn(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass

print("ready", flush=True)
sys.stdin.readline()
before = time.process_time()
threading.Thread(target=burn, args=(0.013,)).start()  # ends before the reading: its time stays with the process
burn(0.004)
for thread in threading.enumerate():
    if thread is not threading.current_thread():
        thread.join()
print(time.process_time() - before, flush=True)
sys.stdin.readline()
"""


def test_a_precise_reading_counts_an_ended_thread_to_the_millisecond():
    """The speed check's reading: a process's own CPU clock, ended threads included, far finer than the 10 ms
    ticks of ``/proc/<pid>/stat`` (17 ms of work would read as 10 or 20 there)."""
    child = subprocess.Popen([sys.executable, "-c", BURN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "ready\n"  # started: Python's own start-up is not in the reading
        before = clocks.precise_cpu([child.pid])
        child.stdin.write("go\n")
        child.stdin.flush()
        own = float(child.stdout.readline())  # the child's own count of the work, for comparison only
        measured = clocks.precise_cpu([child.pid]) - before
        assert own >= 0.017
        assert abs(measured - own) < 0.002, (measured, own)
    finally:
        child.kill()
        child.wait()


SLOW_ONCE = """    global _WARMED
    if max_seq_len > 1000 and not globals().get("_WARMED"):  # a one-off cost on the first large table
        import time
        began = time.process_time()
        while time.process_time() - began < 0.2:
            pass
        _WARMED = True
"""


def test_a_table_slow_once_is_measured_again_and_keeps_the_point(tmp_path, factory, one_thread, fresh_yardstick):
    # A busy machine stretches a measurement as this one-off cost does: the check measures a miss again with new
    # sizes, so vectorized code keeps its points, and a loop (above) misses every try.
    assert _passes(factory, _edited(tmp_path, "slow-once", FIRST_LINE, SLOW_ONCE + FIRST_LINE))


def test_the_yardstick_is_read_in_one_thread_whatever_the_caller_set(two_threads, fresh_yardstick):
    from autograder.lessons.mha_pe.hidden_tests import check_positional_encoding as check

    seen = []

    class Reference:
        """Each reading costs 20 ms of CPU but the sixth, which costs almost nothing."""

        def get_positional_encoding(self, *args):
            seen.append(torch.get_num_threads())
            began = time.process_time()
            while len(seen) < 6 and time.process_time() - began < 0.02:
                pass

    first = check._yardstick(Reference())
    assert seen == [1] * 5 and torch.get_num_threads() == 2  # the caller's setting is given back
    assert first >= 0.02 and check._allowance(Reference(), fresh=False) == check.CEILING  # held to the ceiling
    assert check._yardstick(Reference()) == first and len(seen) == 5  # kept
    assert check._yardstick(Reference(), fresh=True) < 0.02 and seen == [1] * 6  # one more reading, the least kept
    assert check._allowance(Reference(), fresh=False) == check.FLOOR


def test_a_worker_needed_after_the_backstop_passed_charges_the_sleeper_and_never_stalls_it():
    # A submission that slept past the whole submission's backstop, then needs a new worker (its last one was
    # ended): waiting for that worker's hello would time out at once, which reads as the machine's fault and
    # sends the student back to be graded again, and again. It is charged as the sleeper it is instead.
    from autograder.judge.failures import SubmissionTimeout
    from autograder.worker import protocol

    class Slow(FakeWorker):
        def ready(self, deadline):
            if deadline <= self.clock.now:
                raise protocol.ChannelTimeout("no hello before the deadline")
            return self.hello

    remote, clock, _ = _remote(cpu_rate=0.0, wait_rate=0.0, runnable=False)
    remote.launch = lambda: Slow(clock, 0.0, 0.0, False)
    remote.deadline = clock.now
    with pytest.raises(SubmissionTimeout) as caught:
        remote.split_heads(torch.zeros(1, 2, 4), 2)
    assert "waited without computing" in caught.value.summary and not remote.busy
