"""Memory settings for the grading processes: big tensor buffers reused, not mapped afresh each time.

glibc serves a large ``malloc`` (a table of 40 000 rows is 5 MB) with a fresh
``mmap`` and unmaps it on ``free``, so every such tensor costs a page fault per
4 KiB page touched, again and again; on a virtual machine a fault costs
microseconds. Raising the thresholds keeps those buffers in the heap for the
next tensor. Workers get the same through their environment (read when their
Python starts), with PyTorch's huge pages for buffers of 2 MB and more.
"""

from __future__ import annotations

import ctypes

MMAP_THRESHOLD = 32 << 20  # glibc's largest
TRIM_THRESHOLD = 64 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt's parameter numbers (malloc.h)

WORKER_ENV = {
    # hugetlb=1: malloc's heap in huge pages as it grows (torch's import alone leaves 85 MB there), so the
    # zygote's forks copy and free few page-table entries (worker/linux.into_huge_pages does the rest).
    "GLIBC_TUNABLES": f"glibc.malloc.mmap_threshold={MMAP_THRESHOLD}:glibc.malloc.trim_threshold={TRIM_THRESHOLD}"
                      ":glibc.malloc.hugetlb=1",
    "THP_MEM_ALLOC_ENABLE": "1",  # PyTorch: huge pages (where the kernel offers them) for big CPU buffers
}


def keep_big_buffers() -> bool:
    """Apply the thresholds to this process (glibc only); whether they took."""
    try:
        libc = ctypes.CDLL(None)
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
            libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    except (OSError, AttributeError):  # not glibc: its defaults stay
        return False
