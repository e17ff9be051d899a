"""What the machine was doing while the kit ran, so a slow machine can be told from a slow kit.

Cores busy are read from Linux's ``/proc/stat`` (whoever used them: the kit's
judges and workers, and anyone else's jobs); the load average is the kernel's
(processes wanting a core). A run whose cores are all busy while its load
average is well above the core count shared the machine; one with cores idle
was held up by something else. Elsewhere these figures are ``None`` and the
line leaves them out.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path


def busy_cpu_seconds() -> float | None:
    """CPU seconds this machine's cores have spent busy since boot (Linux ``/proc/stat``), or None elsewhere."""
    try:
        ticks = [int(field) for field in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except (OSError, ValueError):
        return None
    idle = ticks[3] + ticks[4]  # idle and iowait
    return (sum(ticks) - idle) / os.sysconf("SC_CLK_TCK")


def load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


@dataclass(frozen=True)
class RunLoad:
    """One run's wall time and what the machine did meanwhile."""

    seconds: float
    cores: int
    busy_cores: float | None  # busy CPU seconds (every process's) per wall second
    load_start: float | None
    load_end: float | None

    def describe(self, count: int, jobs: int) -> str:
        """``4.00 students a second at --jobs 2 (0.25 s a student); 1.9 of 2 cores busy; load average 0.4 at the
        start, 2.1 at the end``."""
        rate = count / self.seconds if self.seconds > 0 else 0.0
        parts = [f"{rate:.2f} students a second at --jobs {jobs} ({self.seconds / max(count, 1):.2f} s a student)"]
        if self.busy_cores is not None:
            parts.append(f"{self.busy_cores:.1f} of {self.cores} cores busy")
        if self.load_start is not None and self.load_end is not None:
            parts.append(f"load average {self.load_start:.1f} at the start, {self.load_end:.1f} at the end")
        return "; ".join(parts)


class LoadWatch:
    """Started at a run's start; :meth:`finish` says what the machine did since."""

    def __init__(self) -> None:
        self.started, self.busy = time.monotonic(), busy_cpu_seconds()
        self.load = load_average()

    def finish(self) -> RunLoad:
        seconds = max(time.monotonic() - self.started, 1e-9)
        busy = busy_cpu_seconds()
        busy_cores = (busy - self.busy) / seconds if busy is not None and self.busy is not None else None
        return RunLoad(seconds, os.cpu_count() or 1, busy_cores, self.load, load_average())
