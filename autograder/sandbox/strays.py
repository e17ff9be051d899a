"""``--sandbox none``: no process a submission starts outlives it, without namespaces or a user of its own.

bwrap and zygote workers end with their PID namespace, and a confined worker's user is emptied
(``worker_process.end_user``); an unisolated worker has neither. So the judge makes itself a child subreaper
(``PR_SET_CHILD_SUBREAPER``): whatever a worker orphans, however often it forks or calls ``setsid``, becomes
the judge's child rather than init's; once a worker has ended, every child of the judge that is not a live
worker is killed and reaped, until none is left.
"""

from __future__ import annotations

import ctypes
import os
import signal
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
_workers: set[int] = set()  # pids of the unisolated workers this process started and has not ended
_subreaper = False


def adopt_orphans() -> None:
    """Make this process the subreaper of everything it starts (once; before its first unisolated worker)."""
    global _subreaper
    if _subreaper:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")
    _subreaper = True


def started(pid: int) -> None:
    """An unisolated worker (or another child of the kit's own, such as the report's drawer) is running as ``pid``
    (spared by :func:`end_strays` until :func:`ended`)."""
    _workers.add(pid)


def ended(pid: int) -> None:
    _workers.discard(pid)


def _children() -> list[int]:
    """This process's children now, from /proc (a stat line's fourth field, after the command's parentheses)."""
    me, found = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 1 and int(fields[1]) == me:
            found.append(int(entry.name))
    return found


def end_strays(rounds: int = 100) -> int:
    """Kill and reap every child of this process that is not a live unisolated worker: what ended workers left
    behind (orphans come here, this process being their subreaper). Returns how many were ended."""
    if not _subreaper:
        return 0
    count = 0
    for _ in range(rounds):
        strays = [pid for pid in _children() if pid not in _workers]
        if not strays:
            break
        for pid in strays:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in strays:  # reaped, so a stray's own orphans come here next round and no zombie is left
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        count += len(strays)
    return count
