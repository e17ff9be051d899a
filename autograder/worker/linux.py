"""The few Linux calls the zygote needs that Python's ``os`` module lacks (through ctypes)."""

import ctypes
import os

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 8, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_DUMPABLE = 1, 4
_CAP_VERSION_3 = 0x20080522

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result, what):
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{what}: {os.strerror(error)}")


def unshare(flags):
    _check(_libc.unshare(flags), "unshare")


def setns(fd, nstype):
    _check(_libc.setns(fd, nstype), "setns")


def mount(source, target, fstype, flags, data=None):
    def raw(text):
        return None if text is None else text.encode()

    _check(_libc.mount(raw(source), raw(target), raw(fstype), flags, raw(data)), f"mount {target}")


def prctl(option, value):
    _check(_libc.prctl(option, value, 0, 0, 0), "prctl")


def map_to_self():
    """In a fresh user namespace, map our own uid and gid (the only mapping an unprivileged process may write)."""
    uid, gid = os.getuid(), os.getgid()
    with open("/proc/self/setgroups", "w") as handle:
        handle.write("deny")
    with open("/proc/self/uid_map", "w") as handle:
        handle.write(f"{uid} {uid} 1")
    with open("/proc/self/gid_map", "w") as handle:
        handle.write(f"{gid} {gid} 1")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_capabilities():
    """Give up every capability (the creator of a user namespace holds all of them inside it)."""
    header = _CapHeader(_CAP_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), data), "capset")


_MADV_COLLAPSE = 25
HUGE_PAGE = 2 << 20  # x86-64's and arm64's


def anonymous_ranges(smaps: str = "/proc/self/smaps", most: int = 8 * HUGE_PAGE) -> list[tuple[int, int]]:
    """``(address, length)`` of this process's private writable anonymous memory (the heap and unnamed mappings),
    cut to whole huge pages and into pieces of at most ``most`` bytes. Only mappings at least half present: a
    sparse one (a thread's stack, say) would grow to whole huge pages."""
    ranges, mapping = [], None

    def add(low, high, perms, name, present):
        start, end = -(-low // HUGE_PAGE) * HUGE_PAGE, high // HUGE_PAGE * HUGE_PAGE
        if perms == "rw-p" and name in ("", "[heap]") and 2 * present >= high - low:
            ranges.extend((at, min(most, end - at)) for at in range(start, end, most))

    with open(smaps) as handle:
        for line in handle:
            fields = line.split()
            if not fields:
                continue
            if "-" in fields[0] and not fields[0].endswith(":"):  # a mapping's first line
                low, high = (int(value, 16) for value in fields[0].split("-"))
                mapping = [low, high, fields[1], fields[5] if len(fields) > 5 else "", 0]
            elif fields[0] == "Rss:" and mapping is not None:
                mapping[4] = int(fields[1]) * 1024
                add(*mapping)
                mapping = None
    return ranges


def into_huge_pages(address: int, length: int) -> bool:
    """Move this range's pages into huge pages where the kernel can (``MADV_COLLAPSE``, Linux 6.1 and later);
    whether it did. Forking then copies one page-table entry per 2 MiB instead of 512, and each child's exit
    frees as few; a child's first write to such a page still copies only its own 4 KiB. Nothing else about the
    range changes (no advice stays behind), and where the kernel refuses (older, huge pages off, no memory to
    spare) nothing changes at all."""
    _libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return _libc.madvise(address, length, _MADV_COLLAPSE) == 0
