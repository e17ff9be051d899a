"""A CPU share of its own for each worker where cgroups v2 offer the cpu controller (autograder/sandbox/cpu_share.py).

The logic runs on a fake /proc and cgroup tree (the kernel's side, which makes each group's interface files, is
stood in for); the real placement runs where this machine's cgroups v2 allow it and is skipped, saying why,
elsewhere."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.sandbox import cpu_share


def _fake(tmp_path, controllers="cpu io memory", group="/ci/job"):
    proc, mount = tmp_path / "proc", tmp_path / "cgroup"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "mounts").write_text(f"proc /proc proc rw 0 0\ncgroup2 {mount} cgroup2 rw 0 0\n")
    (proc / "self" / "cgroup").write_text(f"0::{group}\n")
    parent = mount / group.lstrip("/")
    parent.mkdir(parents=True)
    (parent / "cgroup.controllers").write_text(controllers + "\n")
    return proc, parent


def test_no_shares_where_cgroups_v2_offer_no_cpu_controller(tmp_path):
    proc, _ = _fake(tmp_path, controllers="io memory")
    assert cpu_share.open_shares(proc) is None
    (proc / "self" / "mounts").write_text("cgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\n")  # cgroups v1 only
    assert cpu_share.open_shares(proc) is None


def test_each_worker_gets_a_group_of_its_own_below_one_for_the_judge(tmp_path, monkeypatch):
    proc, parent = _fake(tmp_path)
    # The kernel lists cpu in a new group's controllers once its parent enables it for its children.
    monkeypatch.setattr(cpu_share, "_controllers", lambda group: {"cpu"} if group.exists() else set())
    shares = cpu_share.open_shares(proc)
    assert shares is not None and shares.root == parent / f"autograder-{os.getpid()}"
    assert (shares.root / "cpu.weight").read_text() == "100\n"  # one process's share beside its neighbours
    assert (shares.root / "cgroup.subtree_control").read_text() == "+cpu\n"
    first, second = shares.place(1234), shares.place(5678)
    assert first != second and first.parent == second.parent == shares.root
    assert (first / "cgroup.procs").read_text() == "1234\n" and (second / "cgroup.procs").read_text() == "5678\n"


def test_a_group_that_cannot_be_made_leaves_the_worker_as_it_was(tmp_path, monkeypatch):
    proc, parent = _fake(tmp_path)
    monkeypatch.setattr(cpu_share, "_controllers", lambda group: {"cpu"} if group.exists() else set())
    shares = cpu_share.open_shares(proc)
    (shares.root / "worker-1").write_text("in the way")  # mkdir fails
    assert shares.place(1234) is None


def test_a_real_worker_group_holds_the_process_and_goes_with_it():
    shares = cpu_share.open_shares()
    if shares is None:
        pytest.skip("this machine's cgroups v2 offer no cpu controller to this process (cgroups v1, or not "
                    "delegated): workers share the CPU as processes")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        group = shares.place(child.pid)
        assert group is not None
        line = [entry for entry in Path(f"/proc/{child.pid}/cgroup").read_text().splitlines()
                if entry.startswith("0::")][0]
        assert line.endswith("/" + group.name)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        shares.close()
    assert not shares.root.exists()
