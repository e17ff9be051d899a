"""``--sandbox uid``, judge side: the plans by which a worker confines itself (:mod:`..worker.confine`), or a zygote
and each worker it forks, with no namespaces.

Every confined worker has a folder of its own (:func:`~..worker.confine.private_folder`): a private copy of its
submission, readable by its own user alone, and a home. Two workers of one student (the code's and the
notebook's) have two users, so neither's start may take the other's files away (one shared copy, given to each new
worker's user in turn, left the code's worker unable to read its own submission once the notebook's started).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import tempfile
from pathlib import Path

from . import isolation
from ..worker.confine import private_folder

# Users for confined workers: one per worker, far above any real account's.
UID_BASE = 0x60000000
_uids = itertools.count()
PLAN_ENV = "GRADER_CONFINE"


def next_uid() -> int:
    """A user id for one confined worker: its own, so that nothing of another worker is its to signal or read."""
    return UID_BASE + (os.getpid() % 4096) * 4096 + next(_uids) % 4096


def _code(scratch_dir: str | Path) -> Path:
    """The worker's code copied into ``scratch_dir`` (passable, not listable: a worker reaches its own folders by
    name and sees nothing beside them; its parents are made passable by the worker factory)."""
    code = Path(scratch_dir) / "grader"
    if not (code / "worker").is_dir():
        shutil.copytree(isolation.WORKER_DIR, code / "worker", ignore=shutil.ignore_patterns("__pycache__"))
    os.chmod(scratch_dir, 0o711)
    return code


def _read_roots(code_dir: Path) -> list[str]:
    """What every confined process may read: the system, the runtime, its code (never the kit's install)."""
    roots = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/proc", "/sys", "/dev/null",
             "/dev/zero", "/dev/urandom", "/dev/random", str(code_dir)]
    return roots + [str(path) for path in isolation._runtime_paths()] + [
        str(device) for device in sorted(Path("/dev").glob("nvidia*"))]


def _environment(sandbox, extra_env, code: Path, home: str, plan: dict) -> dict:
    return dict(isolation.worker_environment(sandbox), **(extra_env or {}), PYTHONPATH=str(code), HOME=home,
                MPLCONFIGDIR=home, TMPDIR=home, **{PLAN_ENV: json.dumps(plan)})


def worker(sandbox, python: list[str], scratch_dir, submission_dir, extra_env=None):
    """``(argv, env, cwd)`` of one worker process over a private copy of the staged ``submission_dir``, and the plan
    it confines itself by (read: the runtime, its code and its copy; write: its home)."""
    code = _code(scratch_dir)
    uid = next_uid()
    files = {path.name: path.read_bytes() for path in Path(submission_dir).iterdir() if path.is_file()}
    submission, home = private_folder(str(scratch_dir), uid, files)
    read = _read_roots(code) + [submission]
    # Landlock allows whole folders: the worker allows what lies beside the kit's install, never a parent of it.
    plan = {"uid": uid, "gid": uid, "read": read, "hide": [str(path) for path in isolation._hidden_under(read)],
            "write": [home]}
    return python + [submission], _environment(sandbox, extra_env, code, home, plan), home


def zygote(sandbox, python: list[str], scratch_dir, extra_env=None):
    """``(argv, env, cwd)`` of a zygote for confined workers: root, no namespaces, a scrubbed environment; it locks
    itself (Landlock: the same reads as a worker, writes only its folder, where it makes each worker's own) before
    it forks any, and each fork confines itself to the user the judge names before any student file is read."""
    code = _code(scratch_dir)
    root = tempfile.mkdtemp(prefix="zygote-", dir=scratch_dir)
    os.chmod(root, 0o711)
    home = os.path.join(root, "home")
    os.mkdir(home, 0o700)
    read = _read_roots(code)
    plan = {"zygote": True, "root": root, "uid_base": UID_BASE, "read": read,
            "hide": [str(path) for path in isolation._hidden_under(read)], "write": [root],
            "landlock": sandbox.landlock}
    return python, _environment(sandbox, extra_env, code, home, plan), home


def confined_user(env) -> tuple[int | None, str | None]:
    """``(uid, its folder)`` of the worker started with ``env``, or ``(None, None)`` (not a confined worker)."""
    plan = json.loads((env or {}).get(PLAN_ENV) or "null")
    if not plan or "uid" not in plan:
        return None, None
    return plan["uid"], str(Path(plan["write"][0]).parent)
