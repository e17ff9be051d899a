"""The zygote's memory in huge pages (worker/linux.py): which ranges are asked for, and that asking is safe."""

import mmap

import pytest

from autograder.sandbox import allocator
from autograder.worker import linux

MB = 1 << 20


def _smaps(*mappings):
    """An smaps file: each mapping's first line, then its Rss (kB) among other fields."""
    return "".join(f"{line}\nSize: 1 kB\nRss: {rss} kB\nAnonymous: 0 kB\n" for line, rss in mappings)


SMAPS = _smaps(
    ("00400000-00600000 r-xp 00000000 08:01 12 /usr/bin/python3.11", 2048),
    ("00800000-00a00000 rw-p 00200000 08:01 12 /usr/bin/python3.11", 2048),
    ("01100000-07300000 rw-p 00000000 00:00 0 [heap]", 98 * 1024),
    ("7f0000100000-7f0000b00000 rw-p 00000000 00:00 0", 10 * 1024),
    ("7f0000c00000-7f0000d00000 rw-p 00000000 00:00 0", 1024),
    ("7f0003000000-7f0003c00000 rw-p 00000000 00:00 0", 64),
    ("7f0001000000-7f0001400000 rw-s 00000000 00:05 99 /dev/shm/shared", 4096),
    ("7f0002000000-7f0002400000 r--p 00000000 00:00 0", 4096),
    ("7ffd00000000-7ffd00400000 rw-p 00000000 00:00 0 [stack]", 4096),
)


def test_only_private_anonymous_memory_is_asked_for_in_whole_huge_pages(tmp_path):
    smaps = tmp_path / "smaps"
    smaps.write_text(SMAPS)
    ranges = linux.anonymous_ranges(str(smaps), most=16 * MB)
    assert all(address % linux.HUGE_PAGE == 0 and length % linux.HUGE_PAGE == 0 for address, length in ranges)
    assert all(0 < length <= 16 * MB for _, length in ranges)
    # the heap, 0x1100000-0x7300000, is whole huge pages from 0x1200000 to 0x7200000: 96 MB in pieces of 16 MB
    heap = [(address, length) for address, length in ranges if address < 0x7F0000000000]
    assert heap[0][0] == 0x1200000 and sum(length for _, length in heap) == 96 * MB
    # the unnamed mapping gives its whole huge pages (8 MB of its 10); one smaller than a huge page gives none,
    # and so does a sparse one (64 kB present of 12 MB); a file, a shared mapping, a read-only one and the stack
    # give nothing
    rest = [(address, length) for address, length in ranges if address >= 0x7F0000000000]
    assert rest == [(0x7F0000200000, 8 * MB)]


def _huge_kb(address):
    """AnonHugePages (kB) of this process's mapping that holds ``address``."""
    inside = False
    with open("/proc/self/smaps") as handle:
        for line in handle:
            fields = line.split()
            if "-" in fields[0] and not fields[0].endswith(":"):
                low, high = (int(value, 16) for value in fields[0].split("-"))
                inside = low <= address < high
            elif inside and fields[0] == "AnonHugePages:":
                return int(fields[1])
    return 0


def test_asking_for_huge_pages_keeps_the_memory_as_it_was():
    region = mmap.mmap(-1, 8 * MB, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    pattern = bytes(range(256)) * (8 * MB // 256)
    region.write(pattern)
    address = linux.ctypes.addressof(linux.ctypes.c_char.from_buffer(region))
    start = -(-address // linux.HUGE_PAGE) * linux.HUGE_PAGE
    if linux.into_huge_pages(start, 4 * MB):  # where the kernel can (Linux 6.1 and later, huge pages not off)
        assert _huge_kb(start) >= 2048
    region.seek(0)
    assert region.read() == pattern
    del address
    region.close()


def test_workers_grow_their_heap_in_huge_pages():
    assert "glibc.malloc.hugetlb=1" in allocator.WORKER_ENV["GLIBC_TUNABLES"].split(":")


_GROW_THE_HEAP = """
held = [bytes(3000) for _ in range(30000)]  # 90 MB through malloc, below its mmap threshold: the heap grows
huge, inside = 0, False
for line in open("/proc/self/smaps"):
    fields = line.split()
    if "-" in fields[0] and not fields[0].endswith(":"):
        inside = fields[-1] == "[heap]"
    elif inside and fields[0] == "AnonHugePages:":
        huge += int(fields[1])
print(huge)
"""


def test_a_worker_in_bwrap_grows_its_heap_in_huge_pages():
    """glibc's ``hugetlb`` tunable acts only once malloc has read the kernel's huge-page settings, which a sandbox
    without ``/sys`` hides: the zygote's heap (torch's 85 MB) was then all small pages, each one a page-table
    entry that every worker's fork copied and its exit freed. bwrap binds those settings, read-only."""
    from pathlib import Path

    import pytest
    from workers import run_in_bwrap

    settings = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    if not settings.exists() or "[never]" in settings.read_text():
        pytest.skip("this kernel gives no transparent huge pages")
    done = run_in_bwrap(_GROW_THE_HEAP)
    assert done.returncode == 0, done.stderr[-500:]
    assert int(done.stdout) >= 2048, "the sandboxed heap holds no huge page"


def test_the_zygote_serves_on_when_its_ranges_cannot_be_read(monkeypatch):
    """The collapse runs after the hello: an unreadable map must not end a zygote the judges already use."""
    from autograder.worker import zygote

    def unreadable(most):
        raise OSError("no smaps here")

    monkeypatch.setattr(linux, "anonymous_ranges", unreadable)
    assert zygote._ranges() == []
    monkeypatch.setattr(linux, "anonymous_ranges", lambda most: [(0, linux.HUGE_PAGE)])
    assert zygote._ranges() == [(0, linux.HUGE_PAGE)]


def test_the_zygote_moves_its_memory_into_huge_pages_only_with_a_core_to_spare(monkeypatch):
    """The zygote's collapse into huge pages runs beside the grading, where a core has no judge: with a judge on
    every core (``--jobs 2`` on two) it would take that CPU from the judges, and it is skipped."""
    from autograder.worker import zygote

    monkeypatch.setattr(zygote.os, "sched_getaffinity", lambda pid: {0, 1})
    assert zygote.spare_core(1) and not zygote.spare_core(2) and not zygote.spare_core(3)
    monkeypatch.setattr(zygote.os, "sched_getaffinity", lambda pid: {0})
    assert not zygote.spare_core(1)


def test_a_zygote_is_told_how_many_judges_share_it(monkeypatch, tmp_path):
    from autograder.sandbox import isolation, zygote_client
    from autograder.worker.zygote import JUDGES_ENV

    told = []

    def command(sandbox, control_fds, scratch_dir, info_fd=None, extra_env=None):
        told.append((len(control_fds), (extra_env or {}).get(JUDGES_ENV)))
        raise OSError("not started: the test reads what it would be told")

    monkeypatch.setattr(isolation, "zygote_command", command)
    sandbox = isolation.Sandbox("bwrap", "", isolation.Limits())
    for lend in (0, 1, 2):
        with pytest.raises(OSError):
            zygote_client.Zygote(sandbox, tmp_path, {}, lend=lend)
    assert told == [(1, "1"), (2, "1"), (3, "2")]


def test_the_zygote_collapses_one_huge_page_at_a_time():
    """A judge's fork or kill request waits for the piece under way: one huge page (a few ms), never more."""
    from autograder.worker import zygote

    held = [bytearray(6 * MB) for _ in range(3)]  # present memory of more than one huge page in this process
    ranges = zygote._ranges()
    assert ranges and all(length == linux.HUGE_PAGE for _, length in ranges)
    assert sum(length for _, length in ranges) >= 4 * MB
    del held
