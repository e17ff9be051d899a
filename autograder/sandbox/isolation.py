"""How a worker process is started: inside bubblewrap, confined without namespaces, or (asked for by name) neither.

The bwrap sandbox gives the worker: no network; a read-only view of only the
Python runtime, its installed packages, the worker's own code
(``autograder/worker``) and one staged submission; a private ``/tmp`` of
limited size; its own PID namespace (nothing it starts outlives it); an
unprivileged user (uid 65534); a scrubbed environment; no stdin. The worker
itself lowers its rlimits (memory, processes, file size, open files, CPU)
before it imports any student code.

Where bubblewrap is refused (a container without user namespaces, such as
Gradescope's or a CI runner's), ``uid`` needs no namespaces: the worker,
forked as root by a zygote without namespaces (or started alone, ``--no-fork``)
with a scrubbed environment and a private copy of its files, confines itself
(:mod:`worker.confine`: Landlock, a user of its own, a system-call filter)
before any student code runs, and when it ends every process of its user is
killed (:mod:`.confined`).
"""

import functools
import importlib.metadata
import inspect
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal, get_args

from . import allocator
from ..errors import KitError

WORKER_DIR = Path(__file__).resolve().parents[1] / "worker"
NOBODY = 65534
# auto and isolated: the strongest that works (bwrap, then uid), never none; none only when asked for by name.
Mode = Literal["bwrap", "uid", "none"]  # what a resolved sandbox is
Requested = Literal["auto", "bwrap", "uid", "isolated", "none"]  # what --sandbox may ask for
MODES: tuple[Requested, ...] = get_args(Requested)
ISOLATED: tuple[Mode, ...] = ("bwrap", "uid")


@dataclass(frozen=True)
class Limits:
    """Resource limits of one worker (rlimits, set by the worker) and the judge's clocks."""

    memory_bytes: int = 6 << 30
    processes: int = 512
    file_bytes: int = 32 << 20
    open_files: int = 256
    cpu_seconds: int = 900
    tmp_bytes: int = 64 << 20
    # CPU seconds of the worker's processes, read by the judge (remote.py); the wall clock only backs them up
    call_seconds: float = 20.0  # one call, or one import
    submission_seconds: float = 240.0
    start_seconds: float = 60.0  # wall seconds for a worker's hello (no student code runs before it)
    output_bytes: int = 32 << 10
    reply_bytes: int = 64 << 20  # one reply from a worker, JSON and tensor bytes together
    cell_seconds: float = 30.0  # one notebook cell (the worker's timer; the judge's deadline a little later)
    notebook_seconds: float = 120.0  # a whole notebook: its cells and the calls its checks make


@dataclass(frozen=True)
class Sandbox:
    """A resolved sandbox choice: ``mode`` is ``"bwrap"``, ``"uid"`` or ``"none"``; ``note`` says why."""

    mode: Mode
    note: str = ""
    limits: Limits = field(default_factory=Limits)
    threads: int = 1
    fork: bool = True  # fork workers from a warm zygote (bwrap: when the kernel allows nested namespaces; uid)
    landlock: int = 0  # uid mode: the kernel's Landlock ABI (0: none; the kit's folders are then locked instead)

    @property
    def isolated(self):
        return self.mode in ISOLATED


def _site_dirs():
    """Every folder of installed packages on this interpreter's path: the environment's own and those its ``.pth``
    files add (a virtual environment that reuses another's packages)."""
    return {Path(entry).resolve() for entry in sys.path
            if Path(entry).name in ("site-packages", "dist-packages") and Path(entry).is_dir()}


def _runtime_paths():
    """Folders the worker's Python needs: the interpreter's install and every folder of installed packages."""
    roots = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), Path(sys.exec_prefix).resolve(),
             Path(sys.executable).resolve().parent.parent, *_site_dirs()}
    # Keep the outermost folders only; /usr is bound anyway.
    ordered = sorted(roots, key=lambda p: len(p.parts))
    kept = []
    for path in ordered:
        under_usr = path == Path("/usr") or Path("/usr") in path.parents
        if not under_usr and not any(path == k or k in path.parents for k in kept):
            kept.append(path)
    return kept


@functools.cache
def kit_install():
    """What no worker may see of the kit's own install: the installed package (the engine, the lessons with their
    descriptors, hidden tests and catalogues; the worker gets its own copy of ``worker/``) and every file its
    distribution put beside it (metadata listing the lesson's files, an editable install's finder and ``.pth``)."""
    package = Path(__file__).resolve().parents[1]
    hidden = {package}
    for dist in _distributions_of(package.name):
        for file in dist.files or ():
            if not file.parts or ".." in file.parts:
                continue  # a script installed elsewhere (bin/): not beside the packages
            # A shared __pycache__ holds other packages' files too: only the kit's own are hidden.
            top = file.parts[:2] if file.parts[0] == "__pycache__" else file.parts[:1]
            path = Path(dist.locate_file(Path(*top)))
            if path.exists():
                hidden.add(path.absolute())
    return tuple(sorted(hidden))


def _distributions_of(package):
    """The installed distributions that provide the top-level ``package``, decided per distribution as
    :func:`importlib.metadata.packages_distributions` does (the names its ``top_level.txt`` declares, else those
    its files imply) without its cost: no distribution's metadata is parsed, and only a file list that mentions
    ``package`` at all is parsed into paths (that function parsed every one, torch's ten thousand files among
    them: a quarter to half a second at each grading run's start)."""
    found = []
    for dist in importlib.metadata.distributions():
        declared = (dist.read_text("top_level.txt") or "").split()
        if declared:
            if package in declared:
                found.append(dist)
            continue
        listing = next((text for text in map(dist.read_text, ("RECORD", "installed-files.txt", "SOURCES.txt"))
                        if text is not None), None)
        if listing is not None and package not in listing:
            continue
        inferred = {file.parts[0] if len(file.parts) > 1 else inspect.getmodulename(file)
                    for file in dist.files or ()}
        if package in inferred:
            found.append(dist)
    return found


def _hidden_under(roots):
    """The kit's installed entries that lie in one of ``roots`` (what a worker's view of them must leave out)."""
    return [path for path in kit_install() if any(root == path or root in path.parents for root in map(Path, roots))]


def _parents_args(path, made):
    """bwrap arguments that create ``path``'s ancestors world-traversable (bwrap's default is 0700)."""
    args = []
    for parent in reversed(path.parents):
        if parent == Path("/") or parent in made:
            continue
        made.add(parent)
        args += ["--perms", "0755", "--dir", str(parent)]
    return args


THP_SETTINGS = Path("/sys/kernel/mm/transparent_hugepage")


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
        **allocator.WORKER_ENV,
    }
    return env


def _bwrap(sandbox, binds, command, network=False, cwd="/tmp", info_fd=None, writable=(), extra_env=None):
    """The bwrap command line that runs ``command`` (a list) with the runtime, the worker code and ``binds``
    (read-only ``(source, target)`` pairs; ``writable`` ones are read-write). ``network=True`` keeps the host's
    network namespace; ``info_fd`` receives bwrap's JSON with the host pid of the sandbox's first process (whose
    end is the sandbox's end)."""
    env = dict(worker_environment(sandbox), **(extra_env or {}))
    made = {Path("/tmp")}
    args = ["bwrap", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--clearenv"] + ([] if network else ["--unshare-net"])
    if info_fd is not None:
        args += ["--info-fd", str(info_fd)]
    # The private /tmp first: a runtime that lives under /tmp is bound on top of it, not hidden by it.
    args += ["--size", str(sandbox.limits.tmp_bytes), "--perms", "1777", "--tmpfs", "/tmp"]
    args += _system_args()
    if THP_SETTINGS.is_dir():  # read by glibc's malloc (its hugetlb tunable): its heap then grows in huge pages
        args += _parents_args(THP_SETTINGS, made) + ["--ro-bind", str(THP_SETTINGS), str(THP_SETTINGS)]
    runtime = _runtime_paths()
    for path in runtime:
        args += _parents_args(path, made) + ["--ro-bind", str(path), str(path)]
    for path in _hidden_under([*runtime, "/usr"]):  # the kit's own install, emptied: a folder an empty read-only tmpfs
        args += (["--perms", "0555", "--tmpfs", str(path), "--remount-ro", str(path)] if path.is_dir()
                 else ["--ro-bind", "/dev/null", str(path)])
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


def _unsandboxed(sandbox, command, scratch_dir, extra_env=None):
    """``(argv, env, cwd)`` for ``--sandbox none``: a private copy of the worker package, a scrubbed environment."""
    code = Path(scratch_dir) / "grader"
    if not (code / "worker").is_dir():
        shutil.copytree(WORKER_DIR, code / "worker", ignore=shutil.ignore_patterns("__pycache__"))
    env = dict(worker_environment(sandbox), **(extra_env or {}), PYTHONPATH=str(code), HOME=str(scratch_dir),
               MPLCONFIGDIR=str(scratch_dir))
    return command, env, str(scratch_dir)


def worker_command(sandbox, submission_dir, in_fd, out_fd, scratch_dir, info_fd=None, extra_env=None):
    """``(argv, env, cwd)`` that start one worker over ``submission_dir`` talking on ``in_fd``/``out_fd``;
    ``extra_env`` (the contract, the lesson's warm-up) joins the worker's scrubbed environment."""
    python = [sys.executable, "-B", "-m", "worker.main", str(in_fd), str(out_fd)]
    if sandbox.mode == "none":
        return _unsandboxed(sandbox, python + [str(submission_dir)], scratch_dir, extra_env)
    if sandbox.mode == "uid":  # a private copy of the submission, for this worker's own user alone
        from . import confined

        return confined.worker(sandbox, python, scratch_dir, submission_dir, extra_env)
    return (_bwrap(sandbox, [(submission_dir, "/submission")], python + ["/submission"], info_fd=info_fd,
                   extra_env=extra_env), {}, str(scratch_dir))


def zygote_command(sandbox, control_fds, scratch_dir, info_fd=None, extra_env=None):
    """``(argv, env, cwd)`` that start a zygote (no submission visible to it) serving the sockets ``control_fds``
    (one per judge)."""
    python = [sys.executable, "-B", "-m", "worker.zygote", *map(str, control_fds)]
    if sandbox.mode == "uid":  # root without namespaces: it locks itself, and each worker it forks confines itself
        from . import confined

        return confined.zygote(sandbox, python, scratch_dir, extra_env)
    return _bwrap(sandbox, [], python, info_fd=info_fd, extra_env=extra_env), {}, str(scratch_dir)


# The uid trial confines itself as a worker does, then imports modules no worker has loaded yet: the runtime must
# be readable by the worker's user (a Python under /root, mode 0700, is not), and a socket must be refused.
_UID_TRIAL = """
import json, os, socket
from worker import confine
applied = confine.confine(json.loads(os.environ["GRADER_CONFINE"]))
import decimal, fractions, sqlite3
try:
    socket.socket()
except OSError:
    print("sandbox-ok landlock=%d" % applied["landlock"])
"""


def _trial(sandbox):
    """Start a real worker command that only prints; return None when it works, else the reason (and for uid,
    the Landlock ABI in use as ``(None, abi)``)."""
    with tempfile.TemporaryDirectory(prefix="grader-probe-") as tmp:
        submission = Path(tmp) / "submission"
        submission.mkdir()
        argv, env, cwd = worker_command(sandbox, submission, 0, 1, tmp)
        index = argv.index("-m")
        argv = argv[:index] + ["-c", _UID_TRIAL if sandbox.mode == "uid" else "import sys; print('sandbox-ok')"]
        try:
            done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=60,
                                  stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as error:
            return str(error)
        if done.returncode != 0 or "sandbox-ok" not in done.stdout:
            return (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1][:200]
        if sandbox.mode == "uid":
            return (None, int(done.stdout.split("landlock=")[1].split()[0]))
    return None


# bwrap's own words for a kernel that refuses it user namespaces, and what they mean.
_USERNS_REFUSED = ("No permissions to create new namespace", "setting up uid map", "Creating new namespace failed",
                   "unshare", "Operation not permitted")


def _bwrap_problem(limits, threads):
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed"
    if os.geteuid() == 0 and not os.path.exists("/usr/bin/setpriv"):
        return "setpriv (util-linux) is missing, needed to drop root inside the sandbox"
    reason = _trial(Sandbox("bwrap", "", limits, threads))
    if reason and any(words in reason for words in _USERNS_REFUSED):
        return (f"user namespaces are refused here ({reason}; see kernel.unprivileged_userns_clone, "
                f"kernel.apparmor_restrict_unprivileged_userns or the container's seccomp policy)")
    return reason


def _runtime_roots():
    """The folders of the Python a worker runs: the interpreter's install, the environment, its executable's."""
    return list(dict.fromkeys(Path(path) for path in (sys.base_prefix, sys.prefix, Path(sys.executable).parent)))


def _closed_ancestor(path):
    """The first folder on the way to ``path`` (itself included) an unprivileged user may not pass or read, or
    None."""
    path = Path(path).resolve()
    for folder in [*reversed(path.parents), path]:
        try:
            if folder.stat().st_mode & 0o005 != 0o005:
                return folder
        except OSError:
            return folder
    return None


def system_python():
    """A Python of the distribution's (under /usr, readable by every user) of this minor version, or None."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (f"/usr/bin/python{version}", "/usr/bin/python3"):
        try:
            done = subprocess.run([candidate, "-c", "import sys, venv; print('%d.%d' % sys.version_info[:2])"],
                                  capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0 and done.stdout.strip() == version and _closed_ancestor(candidate) is None:
            return candidate
    return None


def runtime_problem():
    """Why a worker's own user could not run this Python (a runtime under a folder such as ``/root``, mode 0700:
    a pyenv, say), with the fix; None when every user can read it."""
    for root in _runtime_roots():
        closed = _closed_ancestor(root)
        if closed is not None:
            python = system_python()
            fix = (f"build .venv from the distribution's Python: rm -rf .venv && make PYTHON={python}" if python else
                   "install the distribution's Python (apt-get install python3-venv), then: rm -rf .venv && "
                   "make PYTHON=/usr/bin/python3")
            try:
                why = f"{closed} is mode {closed.stat().st_mode & 0o777:04o}"
            except OSError as error:
                why = f"{closed}: {os.strerror(error.errno or 0)}"
            return f"the Python runtime under {root.resolve()} is not readable by an unprivileged user ({why}); {fix}"
    return None


def _uid_problem(limits, threads):
    """None and the Landlock ABI when confined workers work here, else the reason."""
    if os.geteuid() != 0:
        return "confining workers without namespaces needs root (to give each worker a user of its own)", 0
    problem = runtime_problem()
    if problem:
        return problem, 0
    outcome = _trial(Sandbox("uid", "", limits, threads))
    return outcome if isinstance(outcome, tuple) else (outcome, 0)


def bwrap_candidate(mode="auto", limits=None, threads=1, fork=True):
    """The sandbox :func:`choose_sandbox` picks for these arguments if bubblewrap works (not tried here), or None
    where it cannot pick bwrap (another mode asked for, or no bwrap installed): what a zygote started before the
    choice (:mod:`.head_start`) is started in."""
    if mode not in ("auto", "bwrap", "isolated") or shutil.which("bwrap") is None:
        return None
    return Sandbox("bwrap", "", limits or Limits(), threads, fork)


def choose_sandbox(mode="auto", limits=None, threads=1, fork=True, unisolated_ok=False):
    """Resolve ``--sandbox``: ``auto`` is the strongest mode that works (bwrap, then uid), else a KitError that
    names why each failed and the fix; ``isolated`` is the same; ``bwrap`` and ``uid`` must work; ``none`` runs
    unisolated only because it was asked for by name. ``unisolated_ok`` (the demo and ``validate``, which run the
    kit's own material only) lets ``auto`` fall back to none with a loud note."""
    if mode not in MODES:
        raise KitError(f"--sandbox must be one of {', '.join(MODES)}, got {mode!r}")
    limits = limits or Limits()
    if mode == "none":
        return Sandbox("none", "sandbox off (--sandbox none): student code ran without isolation", limits, threads)
    reasons = []
    if mode in ("auto", "bwrap", "isolated"):
        reason = _bwrap_problem(limits, threads)
        if reason is None:
            return bwrap_candidate(mode, limits, threads, fork)
        if mode == "bwrap":
            raise KitError(f"--sandbox bwrap does not work here: {reason}")
        reasons.append(f"bubblewrap: {reason}")
    reason, abi = _uid_problem(limits, threads)
    if reason is None:
        how = f"Landlock ABI {abi}" if abi else "no Landlock: the kit's instructor-only folders are locked instead"
        return Sandbox("uid", f"bubblewrap refused; workers confined by a user of their own, a system-call filter "
                              f"and {how}", limits, threads, fork, abi)
    reasons.append(f"uid: {reason}")
    if mode == "auto" and unisolated_ok:
        return Sandbox("none", f"SANDBOX OFF: {'; '.join(reasons)}; student code ran without isolation", limits,
                       threads)
    if mode == "auto":
        raise KitError(f"no sandbox works here, so nothing is graded: {'; '.join(reasons)} (--sandbox none grades "
                       f"without isolation: trusted code only)")
    raise KitError(f"--sandbox {mode} does not work here: {'; '.join(reasons)}")


def lock_instructor_folders(paths):
    """Without Landlock, what a confined worker's user must not read is made readable by its owner only: ``paths``
    and the installed kit's lessons (every lesson's descriptor, hidden tests and catalogue, whichever is graded)."""
    for path in [*paths, *(entry / "lessons" for entry in kit_install())]:
        if Path(path).exists():
            os.chmod(path, 0o700)
