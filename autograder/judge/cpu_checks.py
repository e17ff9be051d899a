"""CPU-time checks: "is the student's call within a few times the reference's work?", for functions and objects.

Why CPU time, not wall time: the judge shares its cores with other workers and other judges, and waiting for a core
stretches wall time by any factor while the work stays the same. The worker's CPU time (its whole process tree,
threads and children included, read by the judge from ``/proc``, never the worker's word) is the work itself; the
yardstick is the judge's own CPU time on the reference, read in one thread (a pool of threads spinning for a busy
core counts as CPU time) with the collector off, and its least reading is kept, since another process can only
stretch a reading. A miss may still be a stretched measurement, so a check measures again (:func:`within_cpu`), each
try with fresh arguments drawn under the judge's secret (``student.draw(label)``) so nothing cached can answer.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable


def allowance(yardstick_seconds: float, times: float = 5, floor: float = 0.0, ceiling: float = math.inf) -> float:
    """CPU seconds a student's call may take: ``times`` the yardstick, held between ``floor`` and ``ceiling`` (so a
    yardstick stretched many times over cannot let a slow answer through, nor a tiny one fail an honest call)."""
    return min(max(times * yardstick_seconds, floor), ceiling)


class Yardstick:
    """The judge's least CPU seconds for one reference call, kept for the judge's life (one per check)."""

    def __init__(self, first_readings: int = 5):
        self.first_readings = first_readings
        self.least: list[float] = []  # [] until read; then [the least reading so far]

    def read(self, work: Callable[[], object], fresh: bool = False) -> float:
        """The least reading of ``work()``: ``first_readings`` of them the first time, one more when ``fresh`` (a
        retry), none otherwise."""
        readings = 1 if fresh else 0
        if not self.least:
            readings, self.least[:] = self.first_readings, [math.inf]
        import torch  # the judge's: imported long before any check runs

        threads, collecting = torch.get_num_threads(), gc.isenabled()
        torch.set_num_threads(1)
        gc.disable()  # a collection of the judge's heap is not the reference's work
        try:
            for _ in range(readings):
                began = time.process_time()
                work()
                self.least[0] = min(self.least[0], time.process_time() - began)
        finally:
            torch.set_num_threads(threads)
            if collecting:
                gc.enable()
        return self.least[0]


def cpu_of_call(target, name: str, *args, **kwargs) -> tuple[object, float]:
    """``(value, CPU seconds of the worker)`` of ``target.name(*args, **kwargs)``: ``target`` is the student (a
    contract function ``name``) or an object the student's class made (``"forward"`` or ``"__call__"``: the object
    called; the worker answers no other method). Measured alone: never answered from a batch of calls made ahead."""
    if name in ("forward", "__call__") and hasattr(target, "cpu_of_forward"):  # an object of the student's class
        return target.cpu_of_forward(*args, **kwargs)
    measured = getattr(target, "cpu_of_call", None)
    if measured is None:
        raise TypeError(f"no CPU time can be measured for {type(target).__name__}.{name}: a contract function of "
                        "the student, or a student object's forward")
    return measured(name, *args, **kwargs)


def within_cpu(target, name: str, arguments: Callable[[int], tuple], limit: Callable[[bool], float], *,
               tries: int = 3, check: Callable[[object, tuple], None] | None = None) -> object:
    """The value of the first of ``tries`` measured calls ``target.name(*arguments(try))`` whose CPU time is within
    ``limit(retry)`` (``retry``: False for the first try; a retry may read the yardstick once more); each value first
    passes ``check(value, args)`` (a fast wrong answer earns nothing). ``AssertionError("too slow")`` when none is."""
    for attempt in range(tries):
        args = arguments(attempt)
        value, cpu = cpu_of_call(target, name, *args)
        if check is not None:
            check(value, args)
        if cpu <= limit(attempt > 0):
            return value
    raise AssertionError("too slow")
