"""How a worker process is started: inside bubblewrap, or (said loudly) without a sandbox.

The bwrap sandbox gives the worker: no network; a read-only view of only the
Python runtime, its installed packages, the worker's own code
(``autograder/worker``) and one staged submission; a private ``/tmp`` of
limited size; its own PID namespace (nothing it starts outlives it); an
unprivileged user (uid 65534); a scrubbed environment; no stdin. The worker
itself lowers its rlimits (memory, processes, file size, open files, CPU)
before it imports any student code.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .errors import KitError

WORKER_DIR = Path(__file__).resolve().parent / "worker"
NOBODY = 65534
MODES = ("auto", "bwrap", "none")


@dataclass(frozen=True)
class Limits:
    """Resource limits of one worker (rlimits, set by the worker) and the judge's clocks."""

    memory_bytes: int = 6 << 30
    processes: int = 512
    file_bytes: int = 32 << 20
    open_files: int = 256
    cpu_seconds: int = 900
    tmp_bytes: int = 64 << 20
    call_seconds: float = 20.0
    submission_seconds: float = 240.0
    start_seconds: float = 60.0
    output_bytes: int = 32 << 10
    reply_bytes: int = 64 << 20  # one reply from a worker, JSON and tensor bytes together
    cell_seconds: float = 30.0  # one notebook cell (the worker's timer; the judge's deadline a little later)
    notebook_seconds: float = 120.0  # a whole notebook: its cells and the calls its checks make


@dataclass(frozen=True)
class Sandbox:
    """A resolved sandbox choice: ``mode`` is ``"bwrap"`` or ``"none"``; ``note`` says why."""

    mode: str
    note: str = ""
    limits: Limits = field(default_factory=Limits)
    threads: int = 1
    fork: bool = True  # fork workers from a warm zygote when the kernel allows it

    @property
    def isolated(self):
        return self.mode == "bwrap"


def _runtime_paths():
    """Folders the worker's Python needs: the interpreter's install and the environment's packages."""
    roots = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), Path(sys.exec_prefix).resolve(),
             Path(sys.executable).resolve().parent.parent}
    # Keep the outermost folders only; /usr is bound anyway.
    ordered = sorted(roots, key=lambda p: len(p.parts))
    kept = []
    for path in ordered:
        under_usr = path == Path("/usr") or Path("/usr") in path.parents
        if not under_usr and not any(path == k or k in path.parents for k in kept):
            kept.append(path)
    return kept


def _parents_args(path, made):
    """bwrap arguments that create ``path``'s ancestors world-traversable (bwrap's default is 0700)."""
    args = []
    for parent in reversed(path.parents):
        if parent == Path("/") or parent in made:
            continue
        made.add(parent)
        args += ["--perms", "0755", "--dir", str(parent)]
    return args


def _system_args():
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "lib", "lib32", "lib64", "sbin"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    for name in ("/etc/ld.so.cache", "/etc/localtime", "/etc/fonts"):
        if os.path.exists(name):
            args += ["--ro-bind", name, name]
    return args


def _gpu_args():
    """Pass NVIDIA devices through when there are any (for the GPU parity checks)."""
    args = []
    for device in sorted(Path("/dev").glob("nvidia*")):
        args += ["--dev-bind", str(device), str(device)]
    return args


def worker_environment(sandbox):
    """The whole environment of a worker: nothing of the grader's own variables."""
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "MPLCONFIGDIR": "/tmp",
        "OMP_NUM_THREADS": str(sandbox.threads),
        "GRADER_THREADS": str(sandbox.threads),
        "GRADER_LIMITS": json.dumps(asdict(sandbox.limits)),
    }
    return env


def _bwrap(sandbox, binds, command, network=False, cwd="/tmp", info_fd=None, writable=()):
    """The bwrap command line that runs ``command`` (a list) with the runtime, the worker code and ``binds``
    (read-only ``(source, target)`` pairs; ``writable`` ones are read-write). ``network=True`` keeps the host's
    network namespace; ``info_fd`` receives bwrap's JSON with the host pid of the sandbox's first process (whose
    end is the sandbox's end)."""
    env = worker_environment(sandbox)
    made = {Path("/tmp")}
    args = ["bwrap", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--clearenv"] + ([] if network else ["--unshare-net"])
    if info_fd is not None:
        args += ["--info-fd", str(info_fd)]
    # The private /tmp first: a runtime that lives under /tmp is bound on top of it, not hidden by it.
    args += ["--size", str(sandbox.limits.tmp_bytes), "--perms", "1777", "--tmpfs", "/tmp"]
    args += _system_args()
    for path in _runtime_paths():
        args += _parents_args(path, made) + ["--ro-bind", str(path), str(path)]
    args += ["--perms", "0755", "--dir", "/opt", "--perms", "0755", "--dir", "/opt/grader",
             "--ro-bind", str(WORKER_DIR), "/opt/grader/worker"]
    for source, target in binds:
        args += _parents_args(Path(target), made) + ["--ro-bind", str(source), str(target)]
    for source, target in writable:
        args += _parents_args(Path(target), made) + ["--bind", str(source), str(target)]
    args += ["--proc", "/proc", "--dev", "/dev"] + _gpu_args()
    # bwrap's /dev/shm would be an uncapped tmpfs; POSIX shared memory gets the same cap as /tmp.
    args += ["--size", str(sandbox.limits.tmp_bytes), "--perms", "1777", "--tmpfs", "/dev/shm", "--chdir", str(cwd)]
    for key, value in env.items():
        args += ["--setenv", key, value]
    args += ["--setenv", "PYTHONPATH", "/opt/grader"]
    if os.geteuid() == 0:
        # bwrap runs privileged here: drop to nobody inside, after the mounts are made.
        inner = ["/usr/bin/setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--no-new-privs"]
    else:
        args += ["--unshare-user", "--uid", str(NOBODY), "--gid", str(NOBODY)]
        inner = []
    return args + ["--"] + inner + command


def _unsandboxed(sandbox, command, scratch_dir):
    """``(argv, env, cwd)`` for ``--sandbox none``: a private copy of the worker package, a scrubbed environment."""
    code = Path(scratch_dir) / "grader"
    if not (code / "worker").is_dir():
        shutil.copytree(WORKER_DIR, code / "worker", ignore=shutil.ignore_patterns("__pycache__"))
    env = dict(worker_environment(sandbox), PYTHONPATH=str(code), HOME=str(scratch_dir), MPLCONFIGDIR=str(scratch_dir))
    return command, env, str(scratch_dir)


def worker_command(sandbox, submission_dir, in_fd, out_fd, scratch_dir, info_fd=None):
    """``(argv, env, cwd)`` that start one worker over ``submission_dir`` talking on ``in_fd``/``out_fd``."""
    python = [sys.executable, "-B", "-m", "worker.main", str(in_fd), str(out_fd)]
    if sandbox.mode == "none":
        return _unsandboxed(sandbox, python + [str(submission_dir)], scratch_dir)
    return (_bwrap(sandbox, [(submission_dir, "/submission")], python + ["/submission"], info_fd=info_fd), {},
            str(scratch_dir))


def zygote_command(sandbox, control_fd, scratch_dir, info_fd=None):
    """``(argv, env, cwd)`` that start a zygote (no submission visible to it) on the socket ``control_fd``."""
    python = [sys.executable, "-B", "-m", "worker.zygote", str(control_fd)]
    return _bwrap(sandbox, [], python, info_fd=info_fd), {}, str(scratch_dir)


def _trial(sandbox):
    """Start a real worker command that only prints; return None when it works, else the reason."""
    with tempfile.TemporaryDirectory(prefix="mha-pe-probe-") as tmp:
        submission = Path(tmp) / "submission"
        submission.mkdir()
        argv, env, cwd = worker_command(sandbox, submission, 0, 1, tmp)
        index = argv.index("-m")
        argv = argv[:index] + ["-c", "import sys; print('sandbox-ok')"]
        try:
            done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=60,
                                  stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as error:
            return str(error)
        if done.returncode != 0 or "sandbox-ok" not in done.stdout:
            return (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1][:200]
    return None


def choose_sandbox(mode="auto", limits=None, threads=1, fork=True):
    """Resolve ``--sandbox``: ``bwrap`` must work (else KitError); ``auto`` falls back to ``none`` with a note."""
    if mode not in MODES:
        raise KitError(f"--sandbox must be one of {', '.join(MODES)}, got {mode!r}")
    limits = limits or Limits()
    if mode == "none":
        return Sandbox("none", "sandbox off (--sandbox none): student code ran without isolation", limits, threads)
    if shutil.which("bwrap") is None:
        reason = "bubblewrap (bwrap) is not installed"
    elif os.geteuid() == 0 and not os.path.exists("/usr/bin/setpriv"):
        reason = "setpriv (util-linux) is missing, needed to drop root inside the sandbox"
    else:
        reason = _trial(Sandbox("bwrap", "", limits, threads))
    if reason is None:
        return Sandbox("bwrap", "", limits, threads, fork)
    if mode == "bwrap":
        raise KitError(f"--sandbox bwrap does not work here: {reason}")
    return Sandbox("none", f"SANDBOX OFF: {reason}; student code ran without isolation", limits, threads)
