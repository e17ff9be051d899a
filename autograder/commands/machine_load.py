"""What the machine was doing while the kit ran, so a slow machine can be told from a slow kit.

Cores busy are read from Linux's ``/proc/stat`` (whoever used them: the kit's
judges and workers, and anyone else's jobs); the load average is the kernel's
(processes wanting a core). A run whose cores are all busy while its load
average is well above the core count shared the machine; one with cores idle
was held up by something else. Elsewhere these figures are ``None`` and the
line leaves them out.
"""

from __future__ import annotations

import math
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


def cpu_quota(proc_cgroup: Path = Path("/proc/self/cgroup"), root: Path = Path("/sys/fs/cgroup")
              ) -> float | None:
    """The CPU quota, in cores, of this process's cgroup and of each cgroup above it (the smallest), as a container
    limit (``docker --cpus 2``) sets it: cgroup v2's ``cpu.max`` or v1's ``cpu.cfs_quota_us`` over
    ``cpu.cfs_period_us``. None where none is set or none can be read."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    places = []  # (folder of the hierarchy, the process's cgroup in it, v2?)
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if controllers == "":
            places.append((root, path, True))
        elif "cpu" in controllers.split(","):
            # v1 mounts cpu,cpuacct under that name and, as a link, under cpu/: each folder read once
            places += [(folder, path, False) for folder in dict.fromkeys([root / controllers, root / "cpu"])]
    quotas = []
    for base, path, v2 in places:
        folder = base / path.strip("/")
        while True:
            quota = _quota_in(folder, v2)
            if quota is not None:
                quotas.append(quota)
            if folder == base or base not in folder.parents:
                break
            folder = folder.parent
    return min(quotas) if quotas else None


def _quota_in(folder: Path, v2: bool) -> float | None:
    try:
        if v2:
            limit, period = (folder / "cpu.max").read_text().split()[:2]
        else:
            limit = (folder / "cpu.cfs_quota_us").read_text().strip()
            period = (folder / "cpu.cfs_period_us").read_text().strip()
        if limit in ("max", "-1"):
            return None
        return int(limit) / int(period) if int(limit) > 0 and int(period) > 0 else None
    except (OSError, ValueError):
        return None


def usable_cores() -> int:
    """The cores this process may use: those it may run on (its affinity), at most its cgroup's CPU quota
    (rounded up): what ``--jobs`` can usefully be, where ``os.cpu_count()`` counts the whole machine."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    quota = cpu_quota()
    return max(1, min(cores, math.ceil(quota))) if quota is not None else max(1, cores)


def load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


@dataclass(frozen=True)
class RunLoad:
    """One run's wall time and what the machine did meanwhile."""

    seconds: float
    cores: int  # the cores this run may use (:func:`usable_cores`)
    busy_cores: float | None  # busy CPU seconds (every process's, on the whole machine) per wall second
    load_start: float | None
    load_end: float | None
    machine_cores: int | None = None  # the whole machine's, where it has more than the run may use

    def describe(self, count: int, jobs: int) -> str:
        """``4.00 students a second at --jobs 2 (0.25 s a student); 1.9 of 2 cores busy; load average 0.4 at the
        start, 2.1 at the end``."""
        rate = count / self.seconds if self.seconds > 0 else 0.0
        parts = [f"{rate:.2f} students a second at --jobs {jobs} ({self.seconds / max(count, 1):.2f} s a student)"]
        if self.busy_cores is not None and self.machine_cores and self.machine_cores != self.cores:
            parts.append(f"{self.busy_cores:.1f} of the machine's {self.machine_cores} cores busy, {self.cores} "
                         "usable here")
        elif self.busy_cores is not None:
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
        return RunLoad(seconds, usable_cores(), busy_cores, self.load, load_average(), os.cpu_count())
