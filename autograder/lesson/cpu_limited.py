"""A child process of the kit's own work (pytest, nbgrader, a linter) limited by the CPU time it uses, not by the
wall clock: on a machine crowded with other work a child gets a share of a core, so its wall time grows with
the crowd while its CPU time does not. The wall clock stays a backstop for hangs only.

Three limits, each for its own failure: CPU time for work that never ends (the child's and its descendants',
read from ``/proc`` each second, and the kernel's ``RLIMIT_CPU`` on each process of the tree), a child whose
tree has used no CPU at all for ``idle_seconds`` (a sleep, a blocking read) for a hang, and a wall backstop,
``BACKSTOP`` times the CPU limit times how crowded the machine's cores were when it started.
"""

from __future__ import annotations

import contextlib
import math
import os
import resource
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import KitError

# A runnable child on a crowded machine still gets its share of a core within this time; a hung one gets none.
IDLE_SECONDS = 300.0
BACKSTOP = 4  # the wall backstop, in wall seconds per CPU second of the limit (times the machine's crowd)
POLL_SECONDS = 1.0
KERNEL_GRACE = 5  # RLIMIT_CPU's hard limit past its soft one: SIGKILL for a child that ignores SIGXCPU


@dataclass(frozen=True)
class Limits:
    """What a child may take: ``cpu_seconds`` of CPU time (its threads together), no more than ``idle_seconds``
    without using any, and ``wall_seconds`` in all (a backstop, never the measure of work)."""

    cpu_seconds: float
    wall_seconds: float
    idle_seconds: float = IDLE_SECONDS


def limits_for(cpu_seconds: float, load: float = 0.0, cores: int = 1, idle_seconds: float = IDLE_SECONDS) -> Limits:
    """The limits of a child allowed ``cpu_seconds`` on a machine whose load average is ``load`` over ``cores``
    usable cores: the backstop grows with the crowd, since a child beside ``load / cores`` others on each core
    gets about that share of one."""
    crowd = max(1.0, load / max(cores, 1))
    return Limits(cpu_seconds, BACKSTOP * cpu_seconds * crowd, idle_seconds)


def machine_limits(cpu_seconds: float, idle_seconds: float = IDLE_SECONDS) -> Limits:
    """:func:`limits_for` this machine as it is now: its 1-minute load average, the cores this process may use."""
    return limits_for(cpu_seconds, os.getloadavg()[0], len(os.sched_getaffinity(0)), idle_seconds)


def over_limit(limits: Limits, cpu_used: float, wall_elapsed: float, idle_for: float) -> str | None:
    """Why a child running for ``wall_elapsed`` seconds, having used ``cpu_used`` seconds of CPU and none in the
    last ``idle_for`` seconds, must be stopped (words to follow its name), or None while it may go on. A child
    that keeps computing is never stopped before the backstop, however slowly its CPU time grows."""
    if cpu_used > limits.cpu_seconds:
        return f"used more than {limits.cpu_seconds:g} s of CPU time"
    if idle_for >= limits.idle_seconds:
        return f"used no CPU for {limits.idle_seconds:g} s (a hang: a sleep or a blocking call)"
    if wall_elapsed >= limits.wall_seconds:
        return f"still running after {limits.wall_seconds:g} s (the wall-clock backstop)"
    return None


def cpu_of(pid: int) -> float | None:
    """CPU seconds the process ``pid`` and its descendants used (threads, and children already reaped, included),
    from ``/proc``; None once ``pid`` is gone. A wrapper (bwrap, nbgrader waiting on a kernel) shows its
    children's work this way, so it never looks idle while they compute."""
    ticks, pending, seen = 0, [pid], set()
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            if current == pid:
                return None
            continue
        ticks += sum(int(value) for value in fields[11:15])  # utime stime cutime cstime
        for children in Path(f"/proc/{current}/task").glob("*/children"):
            with contextlib.suppress(OSError):
                pending += [int(child) for child in children.read_text().split()]
    return ticks / os.sysconf("SC_CLK_TCK")


def run_limited(argv: list[str], limits: Limits, what: str, **options) -> subprocess.CompletedProcess:
    """Run ``argv`` (stdin empty, text output captured; ``options`` for ``Popen``: ``env``, ``cwd``) under
    ``limits``; a one-line KitError, ``what`` then why, when one is reached. Its exit status is the caller's."""
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                               text=True, **options)
    soft = math.ceil(limits.cpu_seconds)
    with contextlib.suppress(ProcessLookupError):  # set as it starts: what it used before still counts
        resource.prlimit(process.pid, resource.RLIMIT_CPU, (soft, soft + KERNEL_GRACE))
    began = last_change = time.monotonic()
    last_cpu, problem = 0.0, None
    while True:
        try:
            out, err = process.communicate(timeout=POLL_SECONDS)
            break
        except subprocess.TimeoutExpired:  # communicate keeps what it read and may be called again
            now, cpu = time.monotonic(), cpu_of(process.pid)
            if cpu is not None and cpu != last_cpu:
                last_cpu, last_change = cpu, now
            problem = over_limit(limits, last_cpu, now - began, now - last_change)
            if problem:
                process.kill()
                out, err = process.communicate()
                break
    # The kernel's own stop: SIGXCPU at the limit, SIGKILL a few CPU seconds on for a child that ignored it.
    if problem is None and (process.returncode == -signal.SIGXCPU
                            or process.returncode == -signal.SIGKILL and last_cpu >= soft):
        problem = f"used more than {limits.cpu_seconds:g} s of CPU time"
    if problem:
        raise KitError(f"{what} {problem}")
    return subprocess.CompletedProcess(argv, process.returncode, out, err)
