"""A CPU share of its own for each worker, where the machine's cgroup v2 hierarchy offers the ``cpu`` controller.

Linux shares a busy CPU between processes; cgroups v2 share it between groups. A worker placed in a group of
its own weighs as much as each classmate's group, however many processes those start: a submission that forks a
dozen busy loops gets one share, the honest worker beside it another. (Limits count CPU time, so a starved worker
is never charged; a share of its own keeps it from being starved into a regrade.)

Available where ``/proc/self/mounts`` shows a cgroup2 file system, this process's group there lists ``cpu`` in
``cgroup.controllers``, and a group made below it can have ``cpu`` enabled for its own children (a group other
than the root may do that only while it holds no process, so in practice: the grader runs in the root group
of its cgroup namespace, as in a container, or in a delegated group of its own). Elsewhere :func:`open_shares`
returns None and nothing changes.
"""

from __future__ import annotations

import os
from pathlib import Path

PREFIX = "autograder-"


def _cgroup2_mount(mounts: str) -> Path | None:
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[2] == "cgroup2":
            return Path(fields[1])
    return None


def _own_group(cgroup: str) -> str | None:
    """This process's path in the unified hierarchy (the ``0::`` line of ``/proc/self/cgroup``)."""
    for line in cgroup.splitlines():
        if line.startswith("0::"):
            return line[3:].strip() or "/"
    return None


def _controllers(group: Path) -> set[str]:
    try:
        return set((group / "cgroup.controllers").read_text().split())
    except OSError:
        return set()


class CpuShares:
    """Groups of equal CPU weight below ``root`` (a group this judge made), one per worker."""

    def __init__(self, root: Path):
        self.root = root
        self.count = 0
        self.groups: list[Path] = []  # made and not yet removed (a group goes once its processes are gone)

    def place(self, pid: int) -> Path | None:
        """Move process ``pid`` (a worker that has run no student code yet; its children follow it) into a group
        of its own; the group, or None where the move failed (the worker then shares the CPU as before)."""
        for earlier in list(self.groups):  # earlier workers' groups, emptied by now
            if self.remove(earlier):
                self.groups.remove(earlier)
        self.count += 1
        group = self.root / f"worker-{self.count}"
        try:
            group.mkdir()
            self.groups.append(group)
            (group / "cgroup.procs").write_text(f"{pid}\n")
        except OSError:
            return None
        return group

    @staticmethod
    def remove(group: Path) -> bool:
        """Remove a group; False while processes remain in it (the kernel refuses)."""
        try:
            group.rmdir()
        except FileNotFoundError:
            return True
        except OSError:
            return False
        return True

    def close(self) -> None:
        """Remove every group (called once the workers are gone)."""
        for group in self.groups:
            self.remove(group)
        self.remove(self.root)


def open_shares(proc: Path = Path("/proc")) -> CpuShares | None:
    """A :class:`CpuShares` below this process's own cgroup, or None where cgroups v2 cannot give shares here."""
    try:
        mount = _cgroup2_mount((proc / "self" / "mounts").read_text())
        own = _own_group((proc / "self" / "cgroup").read_text())
    except OSError:
        return None
    if mount is None or own is None:
        return None
    parent = mount / own.lstrip("/")
    if "cpu" not in _controllers(parent):
        return None
    root = parent / f"{PREFIX}{os.getpid()}"
    try:
        root.mkdir(exist_ok=True)
        if "cpu" not in _controllers(root):
            (parent / "cgroup.subtree_control").write_text("+cpu\n")
        if "cpu" not in _controllers(root):
            raise OSError("no cpu controller below")
        # The judge's group weighs one process's share beside whatever else runs in its parent (a process there
        # counts as one): its workers share that among themselves, group by group.
        (root / "cpu.weight").write_text("100\n")
        (root / "cgroup.subtree_control").write_text("+cpu\n")
    except OSError:
        CpuShares.remove(root)
        return None
    return CpuShares(root)
