"""Red team 53: attacks that still break a promise after the uid zygote, the seals and the fault barrier.

Each test asserts the promise and is marked ``xfail(strict=True)`` until the engine is fixed: a submission
(1) may not raise its own score, touch a classmate or stop the class, and (2) gets the same outcomes in every
sandbox mode. Each grades one small class with the ``grade`` command, as an instructor would.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from autograder import paths
from autograder.errors import KitError
from autograder.lesson.catalogue import copy_package
from autograder.sandbox.isolation import Limits, choose_sandbox
from lesson import MODULES, RELEASE, SOLUTIONS
from test_hostile import _without_bubblewrap

pytestmark = pytest.mark.slow  # grades a class, builds a venv or runs the demo

# A folder nest deeper than Python's recursion limit, made in the worker's own writable folder (its home under
# --sandbox uid, its private /tmp under bubblewrap). shutil.rmtree (Python 3.11, recursive) raises RecursionError
# on it even with ignore_errors=True: the zygote's end_user, the judge's scratch cleanup.
DEEP_NEST = """
import os as _os
_here = _os.getcwd()
for _ in range(1500):
    _os.mkdir("d")
    _os.chdir("d")
_os.chdir(_here)
"""

# Writes three files of just under RLIMIT_FSIZE into the worker's own folder: 96 MiB, more than the tmpfs a
# bubblewrap worker writes to (Limits.tmp_bytes) holds. Where all of it fits, the module refuses to import.
OVER_TMP = """
import os as _os
_written = 0
for _index in range(3):
    try:
        with open(f"fill-{_index}", "wb") as _handle:
            for _ in range(31):
                _handle.write(b"x" * (1 << 20))
                _written += 1 << 20
    except OSError:
        break
if _written > {limit}:
    raise ImportError("the disk took more than a tmpfs would")
"""

# The lesson's Python loop (the catalogue's lru-cached-loop without the cache), run in a child whose end nobody
# waits for: with SIGCHLD ignored the kernel reaps it, and its CPU time is added to no parent's cutime, so the
# judge's reading of the worker's tree after the call never sees it.
REAPED_LOOP_OLD = "    position = torch.arange(max_seq_len, dtype=torch.float64).unsqueeze(1)  # (seq, 1)"
REAPED_LOOP_NEW = "    return _in_a_child(max_seq_len, d_model, base)\n" + REAPED_LOOP_OLD
REAPED_LOOP_TAIL = '''

def _loop(max_seq_len, d_model, base):
    rows = []
    for pos in range(max_seq_len):
        row = []
        for i in range(0, d_model, 2):
            angle = pos / base ** (i / d_model)
            row += [math.sin(angle), math.cos(angle)]
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float32)


def _in_a_child(max_seq_len, d_model, base):
    import os, signal
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        view = memoryview(_loop(max_seq_len, d_model, base).numpy().tobytes())
        while view:
            view = view[os.write(write, view):]
        os._exit(0)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 1 << 20):
        chunks.append(chunk)
    os.close(read)
    try:
        os.waitpid(pid, 0)  # SIGCHLD ignored: returns once the kernel has reaped it (its CPU time gone with it)
    except ChildProcessError:
        pass
    return torch.frombuffer(bytearray(b"".join(chunks)), dtype=torch.float32).reshape(max_seq_len, d_model).clone()
'''


@pytest.fixture
def root():
    """A folder every user may pass (a confined worker's user must pass every folder above its own)."""
    folder = Path(tempfile.mkdtemp(prefix="mha-pe-redteam-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        _remove(folder)


def _remove(folder):
    """Remove ``folder`` even where an attack left a nest deeper than shutil.rmtree can walk."""
    subprocess.run(["rm", "-rf", str(folder)], check=False)


def _needs(mode):
    try:
        choose_sandbox(mode)
    except KitError as error:
        pytest.skip(f"needs --sandbox {mode}: {error}")


def _needs_uid():
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("confined workers need root, and unshare to make bubblewrap fail in a private mount namespace")


def _grade(root, class_dir, out, mode, *flags):
    """``grade`` with ``--sandbox mode``; uid runs in a private mount namespace in which bubblewrap fails."""
    command = [sys.executable, "-m", "autograder", "grade", str(class_dir), "--out", str(out), "--sandbox", mode,
               *flags]
    if mode == "uid":
        prelude = _without_bubblewrap(Path(tempfile.mkdtemp(dir=root)))
        command = ["unshare", "-m", "bash", "-c", prelude, "confined", *command]
    scratch = Path(tempfile.mkdtemp(dir=root))  # the judge's scratch under root: an attack's leftovers go with it
    scratch.chmod(0o755)
    done = subprocess.run(command, cwd=paths.REPO_ROOT, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, TMPDIR=str(scratch)))
    if mode == "uid" and done.returncode == 2 and "does not work here" in done.stderr:
        pytest.skip(f"confined workers do not work here: {done.stderr.strip()[-300:]}")
    return done


def _record(out, student):
    return json.loads((out / "results" / f"{student}.json").read_text())


def _prepended(class_dir, student, code, base=RELEASE):
    heads = copy_package(base, class_dir / student, MODULES) / "heads.py"
    heads.write_text(code + "\n" + heads.read_text())


@pytest.mark.parametrize("flags", [(), ("--no-fork",)], ids=["forked", "no-fork"])
def test_a_deep_folder_nest_in_a_confined_workers_home_does_not_stop_the_class(root, flags):
    """The attacker's worker makes 1500 nested folders in its home. Before every student-writable tree was removed
    by worker/tree.py's remove_tree (GNU rm, any depth), shutil.rmtree raised there. Forked: the zygote's end_user raised
    RecursionError (its main loop catches OSError only), the zygote dies and is replaced (a classmate's record
    notes it), and the nest, left in the judge's scratch, makes WarmJudge.__exit__'s TemporaryDirectory cleanup
    raise: ``grade`` exits 1 with a traceback and writes no gradebook.csv or report.md. --no-fork: the attacker's
    own record is turned into a grader_error (regraded by every --resume, which crashes again)."""
    _needs_uid()
    class_dir, out = root / "class", root / "out"
    _prepended(class_dir, "a-deep", DEEP_NEST)
    for student in ("b-honest", "c-honest"):
        copy_package(SOLUTIONS, class_dir / student, MODULES)
    done = _grade(root, class_dir, out, "uid", "--skip-notebook", *flags)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (out / "gradebook.csv").is_file() and (out / "report.md").is_file()
    deep = _record(out, "a-deep")
    assert deep["extra_data"]["sandbox"] == "uid"
    assert deep["score"] == 0 and deep["extra_data"]["grader_failures"] == []
    for student in ("b-honest", "c-honest"):
        honest = _record(out, student)
        assert honest["score"] == honest["extra_data"]["max_score"] > 0
        assert honest["extra_data"]["notes"] == []


@pytest.mark.xfail(strict=True, reason="red team: a Python loop in a child reaped by the kernel (SIGCHLD ignored) "
                                        "passes the speed check: its CPU time is in no process the judge reads")
def test_work_done_in_a_child_the_kernel_reaps_is_counted_by_the_speed_check(root):
    """The reference with the lesson's Python loop for get_positional_encoding, run in a forked child while
    SIGCHLD is ignored: 121/121 under bubblewrap (the same loop in the worker itself fails
    test_table_is_vectorized: 119/121). clocks.precise_cpu sums each live process's clock plus cutime/cstime,
    and an auto-reaped child's time reaches neither."""
    _needs("bwrap")
    class_dir, out = root / "class", root / "out"
    folder = copy_package(SOLUTIONS, class_dir / "reaped-loop", MODULES)
    source = folder / "positional_encoding.py"
    text = source.read_text()
    assert REAPED_LOOP_OLD in text
    source.write_text(text.replace(REAPED_LOOP_OLD, REAPED_LOOP_NEW, 1) + REAPED_LOOP_TAIL)
    done = _grade(root, class_dir, out, "bwrap", "--skip-notebook")
    assert done.returncode == 0, done.stderr[-2000:]
    outcomes = {test["extra_data"]["id"]: test.get("status") for test in _record(out, "reaped-loop")["tests"]}
    assert outcomes["test_values_follow_the_formula"] == "passed"  # the loop's table is right: only speed fails
    assert outcomes["test_table_is_vectorized"] == "failed"


@pytest.mark.xfail(strict=True, reason="red team: a confined worker's home is on the host disk, uncapped: what a "
                                        "bwrap worker's tmpfs refuses, uid accepts (outcomes differ; the disk fills)")
def test_a_confined_worker_writes_no_more_than_a_bubblewrap_worker(root):
    """The stubs, with an import that refuses to load when 96 MiB of files fitted in the worker's own folder: under
    bubblewrap the tmpfs (Limits.tmp_bytes, 64 MiB) stops the third file, under --sandbox uid every byte lands on
    the host's disk (RLIMIT_FSIZE caps each file, not the folder), so the same submission scores differently; a
    loop of such files fills the grading machine's disk while it runs."""
    _needs("bwrap")
    _needs_uid()
    class_dir = root / "class"
    _prepended(class_dir, "a-fill", OVER_TMP.replace("{limit}", str(Limits().tmp_bytes)), base=SOLUTIONS)
    scores = {}
    for mode in ("bwrap", "uid"):
        done = _grade(root, class_dir, root / mode, mode, "--skip-notebook")
        assert done.returncode == 0, done.stderr[-2000:]
        record = _record(root / mode, "a-fill")
        assert record["extra_data"]["sandbox"] == mode
        scores[mode] = record["score"]
    assert scores["bwrap"] == _record(root / "bwrap", "a-fill")["extra_data"]["max_score"] > 0
    assert scores["uid"] == scores["bwrap"]
