"""Each judge and its workers on one core of their own, where the machine has a core for every judge.

A judge and its worker take turns: the judge sends a request and waits, the worker answers and waits. A few
hundred such turns make one student. When the two sit on different cores, every turn wakes a sleeping core,
which on a virtual machine costs tens of microseconds of CPU on both sides (measured here: a pipe's round trip
takes about 60 us across cores and 6 us on one). Placed on one core, the pair never runs at once anyway, and
each turn is a plain switch.

Only where ``--jobs`` is at most the cores this process may use: with more judges than cores the scheduler
balances better than a fixed plan. Time limits count CPU time, so placement changes how fast a class is graded,
never a grade. The zygote stays free to run anywhere (it forks the next worker while the pair works), and a
worker being ended moves to a core no judge holds, where there is one, so its exit (freeing its memory) runs
there too.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator


def core_for(index: int, jobs: int, threads: int = 1) -> int | None:
    """The core for the ``index``-th of ``jobs`` judges: the ``index``-th core this process may use, or None (no
    placement) where there are fewer than two such cores, fewer cores than judges, or workers run more than one
    thread each (``threads``: one core would take turns with them)."""
    try:
        cores = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity on this platform
        return None
    if len(cores) < 2 or jobs > len(cores) or not 0 <= index < jobs or threads != 1:
        return None
    return cores[index]


def place(pid: int, core: int | None) -> bool:
    """Put process ``pid`` (0: the calling thread) on ``core`` alone; whether it worked (a worker that has
    already ended, or a platform without affinity, leaves everything as it was)."""
    if core is None:
        return False
    try:
        os.sched_setaffinity(pid, {core})
    except (AttributeError, OSError):
        return False
    return True


def spare_cores(jobs: int) -> frozenset[int]:
    """The cores this process may use that none of ``jobs`` placed judges holds (they take the first ones): where
    a worker being ended can run its exit. Empty where judges are not placed or every core has one. Read before
    the judge's thread is placed (it may then use its own core only)."""
    try:
        cores = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return frozenset()
    if len(cores) < 2 or jobs > len(cores):
        return frozenset()
    return frozenset(cores[jobs:])


def set_aside(pid: int, cores: frozenset[int]) -> bool:
    """Move process ``pid`` (a worker being ended) to ``cores`` (:func:`spare_cores`), off its judge's: what its
    exit costs (its memory and page tables freed, a few ms a student) then runs beside the judge's own work
    between students (the result written, the next student prepared), not in its turn, and never on another
    judge's core. Whether it took (no spare core, or a process already gone, leave everything as it was)."""
    if not cores:
        return False
    try:
        os.sched_setaffinity(pid, cores)
    except (AttributeError, OSError, ValueError):
        return False
    return True


@contextlib.contextmanager
def judge_on(core: int | None) -> Iterator[int | None]:
    """Run the block with the calling thread (a judge) on ``core``; its former cores are given back after.
    Yields the core, or None where the placement did not take (then workers are not placed either)."""
    try:
        before = os.sched_getaffinity(0)
    except (AttributeError, OSError):
        yield None
        return
    placed = place(0, core)
    try:
        yield core if placed else None
    finally:
        if placed:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, before)
