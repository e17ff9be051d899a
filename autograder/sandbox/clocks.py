"""A worker's CPU time and scheduling state, read by the judge from ``/proc`` (never the worker's word).

Time limits count the CPU a worker's processes used, so a busy machine cannot make honest code look slow; the
wall clock only backs them up, to catch hangs. When that backstop fires, the samples taken while waiting say
whose fault it was: the submission's (it computed, or it slept or blocked) or the machine's (it was ready to run
and waited for a CPU).

Readings cover a worker's whole tree: every process whose parent chain reaches its root (threads, children and
the children those reaped, via ``cutime``/``cstime``). The cheap reading (:class:`StatFile`, one ``pread`` of a
file kept open) covers the worker's main process only; it is what each call takes as its starting point.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass

TICKS = os.sysconf("SC_CLK_TCK")
NS = 1e-9


def _fields(data: bytes) -> list[bytes]:
    """The fields of a ``/proc/<pid>/stat`` line after the command name (which may hold spaces or parentheses);
    index 0 is the state (field 3 of proc(5))."""
    return data[data.rindex(b")") + 2:].split()


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:  # the process ended meanwhile
        return None


def _ticks_cpu(fields: list[bytes]) -> float:
    """utime + stime + cutime + cstime (fields 14-17), in seconds: the process, its threads and its reaped
    children."""
    return sum(int(value) for value in fields[11:15]) / TICKS


class StatFile:
    """One process's ``/proc/<pid>/stat``, opened once: each :meth:`cpu` is a single ``pread`` (a few µs). The
    descriptor stays bound to that process, so a recycled pid is never read."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.fd: int | None = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)

    def cpu(self) -> float | None:
        """CPU seconds of the process and its reaped children, or None once it has ended."""
        if self.fd is None:
            return None
        try:
            return _ticks_cpu(_fields(os.pread(self.fd, 4096, 0)))
        except (OSError, ValueError):
            return None

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def parents() -> dict[int, int]:
    """``{pid: parent pid}`` of every process this ``/proc`` shows (this kernel may lack the ``children``
    files, so a tree is found from its parents)."""
    found = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            data = _read(f"/proc/{entry.name}/stat")
            if data:
                try:
                    found[int(entry.name)] = int(_fields(data)[1])
                except (ValueError, IndexError):
                    pass
    return found


@functools.cache
def _children_files() -> bool:
    """Whether this kernel lists each task's children (``/proc/<pid>/task/<tid>/children``): a tree is then read
    from its root down, whatever else runs on the machine, instead of from every process's parent."""
    return os.path.exists(f"/proc/self/task/{os.getpid()}/children")


def _listed_children(pid: int) -> list[int]:
    found = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:  # the process ended meanwhile
        return found
    for tid in tasks:
        found += [int(child) for child in (_read(f"/proc/{pid}/task/{tid}/children") or b"").split()]
    return found


def tree(root: int, links: dict[int, int] | None = None) -> list[int]:
    """``root`` and every process below it (from ``links``, ``{pid: parent}``, when given)."""
    if links is None and _children_files():
        below = _listed_children
    else:
        links = parents() if links is None else links
        table: dict[int, list[int]] = {}
        for pid, parent in links.items():
            table.setdefault(parent, []).append(pid)
        below = lambda pid: table.get(pid, ())  # noqa: E731
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(below(pid))
    return found


def children(pid: int) -> list[int]:
    if _children_files():
        return sorted(_listed_children(pid))
    return sorted(child for child, parent in parents().items() if parent == pid)


def host_pid(root: int, inner: int, depth: int = 1) -> int | None:
    """The host pid of the process below ``root`` whose pid in the PID namespace ``depth`` levels inside ours is
    ``inner`` (``NSpid`` in ``/proc/<pid>/status``: how a zygote's pid for its child maps to ours)."""
    for pid in tree(root):
        status = _read(f"/proc/{pid}/status") or b""
        for line in status.splitlines():
            if line.startswith(b"NSpid:"):
                ids = line.split()[1:]
                if len(ids) > depth and ids[depth] == str(inner).encode():
                    return pid
    return None


def _process_clock(pid: int) -> int:
    """The clock id of process ``pid``'s CPU time, all its threads, ended ones included (Linux's
    ``CPUCLOCK_SCHED`` clock of a whole process, as ``clock_getcpuclockid`` makes it): read in nanoseconds, where
    ``/proc/<pid>/stat`` counts the kernel's 10 ms ticks."""
    return ((~pid) << 3) | 2


def precise_cpu(pids: Iterable[int]) -> float:
    """CPU seconds of the tree ``pids`` to the nanosecond: each process's own clock (its threads, ended ones
    included) plus what its reaped children used (``cutime``/``cstime``, in ticks: a submission that works in a
    child it reaps hides at most a tick a reading). A process the clock cannot read (ended meanwhile) counts its
    ticks instead. For short measured calls (a vectorization check); limits use :func:`usage`."""
    cpu = 0.0
    for pid in pids:
        data = _read(f"/proc/{pid}/stat")
        if not data:
            continue
        fields = _fields(data)
        try:
            own = time.clock_gettime(_process_clock(pid))
        except OSError:
            own = (int(fields[11]) + int(fields[12])) / TICKS
        cpu += own + (int(fields[13]) + int(fields[14])) / TICKS
    return cpu


@dataclass(frozen=True)
class Usage:
    """One reading of a worker's tree: CPU seconds (all of it, ever), run-queue wait seconds (its live threads'),
    and whether a thread of normal priority was runnable at that moment. ``alive``: any process of it left."""

    cpu: float = 0.0
    waited: float = 0.0
    runnable: bool = False
    alive: bool = True


def usage(pids: Iterable[int], nice: int | None = None) -> Usage:
    """Read the tree ``pids``. A thread counts as runnable only at the scheduling class and priority the worker
    started with (``nice``: the judge's own): a submission that lowers its own priority waits by its own
    choice, and that must not pass for a busy machine."""
    nice = os.getpriority(os.PRIO_PROCESS, 0) if nice is None else nice
    cpu = waited = 0.0
    runnable = alive = False
    for pid in pids:
        data = _read(f"/proc/{pid}/stat")
        if not data:
            continue
        fields = _fields(data)
        alive = True
        cpu += _ticks_cpu(fields)
        try:
            threads = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in threads:
            line = _read(f"/proc/{pid}/task/{tid}/stat")
            sched = _read(f"/proc/{pid}/task/{tid}/schedstat")
            if sched:
                parts = sched.split()
                waited += int(parts[1]) * NS if len(parts) > 1 else 0.0
            if line:
                thread = _fields(line)
                # field 19 is nice, field 41 the policy (0: SCHED_OTHER)
                if thread[0] == b"R" and int(thread[16]) <= nice and int(thread[38]) == 0:
                    runnable = True
    return Usage(cpu, waited, runnable, alive)


# ------------------------------------------------------------------ whose fault a long wait was

@dataclass
class Samples:
    """What the judge saw while it waited for replies: seconds of wall time it judged computing, starved (ready
    to run, waiting for a CPU) and asleep (blocked in a sleep, a read, a lock)."""

    computing: float = 0.0
    starved: float = 0.0
    asleep: float = 0.0

    def add(self, wall: float, cpu: float, waited: float, runnable: bool) -> None:
        """Share out ``wall`` seconds between two readings that differ by ``cpu`` and run-queue ``waited``
        seconds; ``runnable``: the second reading saw a runnable thread (for kernels without schedstat)."""
        wall = max(wall, 0.0)
        computing = min(max(cpu, 0.0), wall)
        starved = min(max(waited, 0.0), wall - computing)
        if starved == 0.0 and runnable:  # no run-queue figures: the moment's state stands for the interval
            starved = (wall - computing) / 2
        self.computing += computing
        self.starved += starved
        self.asleep += wall - computing - starved

    def merge(self, other: Samples) -> None:
        self.computing += other.computing
        self.starved += other.starved
        self.asleep += other.asleep

    @property
    def mostly_asleep(self) -> bool:
        return self.asleep > self.starved + self.computing

    @property
    def mostly_starved(self) -> bool:
        """Whether waiting for a CPU explains more than sleeping does: the machine's fault."""
        return self.starved > self.asleep
