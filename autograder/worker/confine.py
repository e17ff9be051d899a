"""Confinement without namespaces, for machines where bubblewrap is refused (``--sandbox uid``).

The worker, started as root, confines itself before any student code runs:

1. Landlock (when the kernel has it): read and execute only the runtime (never the kit's own install: what
   lies beside it is allowed entry by entry), its own code and the submission; write only its own scratch
   folder; no TCP (ABI 4); no signals or abstract sockets beyond itself (ABI 6).
2. ``no_new_privs``, then a user and group of its own (one per worker, so RLIMIT_NPROC counts only its own
   processes and no other worker is its to signal, trace or read).
3. A seccomp filter that refuses what would reach past the worker: sockets (the network), System V IPC and
   POSIX message queues (memory that outlives a process), tracing, io_uring (which can open sockets past the
   filter), namespaces, keyrings, BPF, and every other architecture's system calls.

All of it through ctypes, as :mod:`.linux` does.
"""

import ctypes
import errno
import os
import platform
import signal
import struct
import time

from .tree import remove_tree

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2

# System calls refused, by architecture: (audit arch, {name: number}).
_ARCHES = {
    "x86_64": (0xC000003E, {
        "socket": 41, "shmget": 29, "semget": 64, "msgget": 68, "mq_open": 240, "ptrace": 101,
        "process_vm_readv": 310, "process_vm_writev": 311, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "bpf": 321, "userfaultfd": 323, "perf_event_open": 298, "keyctl": 250,
        "add_key": 248, "request_key": 249, "unshare": 272, "setns": 308, "mount": 165, "pivot_root": 155,
        "chroot": 161, "kcmp": 312, "open_by_handle_at": 304, "name_to_handle_at": 303}),
    "aarch64": (0xC00000B7, {
        "socket": 198, "shmget": 194, "semget": 190, "msgget": 186, "mq_open": 180, "ptrace": 117,
        "process_vm_readv": 270, "process_vm_writev": 271, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "bpf": 280, "userfaultfd": 282, "perf_event_open": 241, "keyctl": 219,
        "add_key": 217, "request_key": 218, "unshare": 97, "setns": 268, "mount": 40, "pivot_root": 41,
        "chroot": 51, "kcmp": 272, "open_by_handle_at": 265, "name_to_handle_at": 264}),
}
_X32_BIT = 0x40000000  # x86_64's x32 ABI: the same calls under other numbers
_ALLOW, _ERRNO, _KILL = 0x7FFF0000, 0x00050000, 0x80000000


def _check(result, what):
    if result < 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{what}: {os.strerror(error)}")
    return result


def seccomp_program(machine=None):
    """The classic-BPF filter (as bytes) that refuses the calls in :data:`_ARCHES` (sockets with EACCES, the rest
    with EPERM), kills a process that calls in through another architecture, and allows everything else."""
    arch, calls = _ARCHES[machine or platform.machine()]

    def op(code, k, jt=0, jf=0):
        return struct.pack("<HBBI", code, jt, jf, k)

    load, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    x86 = arch == 0xC000003E
    program = [op(load, 4), op(jeq, arch, 1, 0), op(ret, _KILL), op(load, 0)]
    if x86:  # past the refusals and the allow below, to the x32 refusal at the very end
        program.append(op(jge, _X32_BIT, 2 * len(calls) + 1, 0))
    for name, number in calls.items():
        code = errno.EACCES if name == "socket" else errno.EPERM
        program += [op(jeq, number, 0, 1), op(ret, _ERRNO | code)]
    program.append(op(ret, _ALLOW))
    if x86:
        program.append(op(ret, _ERRNO | errno.EPERM))
    return b"".join(program)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install_seccomp():
    """Install the filter on this process and all it will start (``no_new_privs`` first, as the kernel asks)."""
    program = seccomp_program()
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(no_new_privs)")
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "seccomp")


# ---------------------------------------------------------------- Landlock

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # the same numbers on every architecture
_RULE_PATH_BENEATH, _VERSION = 1, 1
_READ = (1 << 0) | (1 << 2) | (1 << 3)  # execute, read file, read dir
_WRITE_ALL_V1 = (1 << 13) - 1  # every file-system right of ABI 1
_REFER, _TRUNCATE, _IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1


def landlock_abi():
    """The kernel's Landlock ABI version, or 0 where there is none (old kernel, disabled, or filtered)."""
    result = _libc.syscall(_CREATE_RULESET, None, 0, _VERSION)
    return max(int(result), 0)


def _handled_fs(abi):
    rights = _WRITE_ALL_V1
    if abi >= 2:
        rights |= _REFER
    if abi >= 3:
        rights |= _TRUNCATE
    if abi >= 5:
        rights |= _IOCTL_DEV
    return rights


def landlock(read_paths, write_paths):
    """Allow only reading (and executing) below ``read_paths`` and anything below ``write_paths``; deny every
    other file-system access, TCP and (ABI 6) signals and abstract sockets beyond this process's domain.
    Returns the ABI used; raises OSError where Landlock is missing."""
    abi = landlock_abi()
    if abi < 1:
        raise OSError(errno.ENOSYS, "Landlock is not available")
    handled = _handled_fs(abi)
    fields = [handled]
    if abi >= 4:
        fields.append(_NET_BIND_TCP | _NET_CONNECT_TCP)
    if abi >= 6:
        fields.append(_SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL)
    attr = struct.pack(f"<{len(fields)}Q", *fields)
    ruleset = _check(_libc.syscall(_CREATE_RULESET, attr, len(attr), 0), "landlock_create_ruleset")
    try:
        for paths, rights in ((read_paths, _READ), (write_paths, handled)):
            for path in paths:
                try:
                    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                except OSError:
                    continue  # a folder this machine lacks
                try:
                    allowed = rights if os.path.isdir(path) else rights & ((1 << 0) | (1 << 1) | (1 << 2) | _TRUNCATE
                                                                          | _IOCTL_DEV)
                    rule = struct.pack("<Qi", allowed & handled, fd)
                    _check(_libc.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, rule, 0), f"landlock rule {path}")
                finally:
                    os.close(fd)
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(no_new_privs)")
        _check(_libc.syscall(_RESTRICT_SELF, ruleset, 0), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return abi


def beside(roots, hidden):
    """``roots`` with every folder that holds one of ``hidden`` replaced by its other entries, one by one (down to
    the hidden one's own folder), so that no rule allows a parent of a hidden path. Paths are compared resolved
    (a rule follows links: ``lib64`` linking to ``lib`` would allow all of ``lib``)."""
    hidden = {os.path.realpath(path) for path in hidden}
    kept = []
    for root in map(os.path.realpath, roots):
        inside = [path for path in hidden if path.startswith(root.rstrip("/") + "/")]
        if root in hidden:
            continue
        if not inside:
            kept.append(root)
            continue
        try:
            entries = sorted(os.listdir(root))
        except OSError:
            continue  # unreadable here: nothing of it is allowed
        kept += beside([os.path.join(root, name) for name in entries], inside)
    return kept


def _fill_import_caches():
    """List every folder on ``sys.path`` now, while this process may: Python's path finders keep each listing, so
    the packages still import after Landlock has taken away the right to list a folder that holds a hidden entry."""
    import importlib.machinery

    importlib.machinery.PathFinder.find_spec("__grader_fills_the_import_caches__")


def become(uid, gid):
    """Drop root for good: no supplementary groups, then ``gid`` and ``uid`` (real, effective and saved)."""
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)


def confine(plan):
    """Apply a confinement plan (a dict from the judge: ``uid``, ``gid``, ``read``, ``write``; ``beside``: the
    read folders already laid beside ``hide`` by the zygote, once for all its workers); return what was applied,
    for the worker's hello. Landlock is used where the kernel has it; the rest is required."""
    applied = {}
    try:
        _fill_import_caches()
        if "beside" in plan:  # laid out by the zygote; ``read`` then adds this worker's own folders only
            read = list(dict.fromkeys([*plan["beside"], *plan["read"]]))
        else:
            read = list(dict.fromkeys(beside(plan["read"], plan.get("hide", ()))))
        applied["landlock"] = landlock(read, plan["write"])
    except OSError as error:
        if plan.get("require_landlock"):
            raise
        applied["landlock"] = 0
        applied["landlock_error"] = str(error)[:200]
    become(int(plan["uid"]), int(plan["gid"]))
    install_seccomp()
    applied["uid"] = os.getuid()
    return applied


# ---------------------------------------------------------------- a worker's own folder, and its end

def private_folder(root, uid, files):
    """Make ``root``/u``uid`` (root's, passable, not listable) holding ``submission/`` with ``files`` (``{file
    name: bytes}``, readable by ``uid`` alone: 0500/0400) and ``home/`` (``uid``'s, 0700); return ``(submission,
    home)``. Every confined worker gets one of its own: no later worker's start can take another's files away."""
    folder = os.path.join(root, f"u{uid}")
    os.mkdir(folder, 0o711)
    submission, home = os.path.join(folder, "submission"), os.path.join(folder, "home")
    os.mkdir(home, 0o700)
    os.chown(home, uid, uid)
    os.mkdir(submission, 0o700)
    for name, data in files.items():
        path = os.path.join(submission, name)
        with open(path, "wb") as handle:
            handle.write(data)
        os.chown(path, uid, uid)
        os.chmod(path, 0o400)
    os.chown(submission, uid, uid)
    os.chmod(submission, 0o500)
    return submission, home


def processes_of(uid, pids=None):
    """Pids of the live processes whose real user is ``uid`` (of ``pids``, or of every process ``/proc`` shows),
    zombies left out (they run nothing). Read from each ``status`` file: a confined process is not dumpable (it
    changed users), so its ``/proc`` folder is root's, whoever it runs as."""
    found = []
    for pid in pids if pids is not None else (int(name) for name in os.listdir("/proc") if name.isdigit()):
        try:
            with open(f"/proc/{pid}/status", "rb") as handle:
                status = handle.read(2048)
        except OSError:
            continue  # ended meanwhile
        fields = dict(line.split(b":", 1) for line in status.splitlines() if b":" in line)
        uids = fields.get(b"Uid", b"").split()
        if uids and int(uids[0]) == uid and not fields.get(b"State", b"").strip().startswith(b"Z"):
            found.append(pid)
    return found


def _kill_all_of(uid):
    """SIGKILL every process of ``uid`` at once: a child that becomes ``uid`` signals -1, which reaches every
    process of that user and nothing else (the kernel's rule for kill(-1) by an unprivileged process), all in one
    pass under the kernel's task-list lock, so none of them can fork after it (a fork with SIGKILL pending fails)."""
    child = os.fork()
    if child == 0:
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            os.kill(-1, signal.SIGKILL)  # 0 even when it found none of this user's: any other process counts
        finally:
            os._exit(0)
    os.waitpid(child, 0)


def end_user(uid, seconds=5.0, folder=None):
    """Kill every process of ``uid`` (a confined worker's own user) and wait until none is left; then remove what
    it left in the shared folders and its own ``folder`` (:func:`private_folder`'s). Whether it is all gone within
    ``seconds`` (a process a SIGKILL has not ended by then is stuck in the kernel and runs no code).

    Without a PID namespace this is how "ended" is made true. Nothing but ``uid``'s own processes can start one
    of ``uid``'s, so once they are killed together none can appear; the kill is sent again while any remains."""
    deadline = time.monotonic() + seconds
    while True:
        _kill_all_of(uid)
        if not processes_of(uid):
            _remove_owned(uid)
            if folder is not None:
                remove_tree(folder)
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)


SHARED_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm")


def _remove_owned(uid):
    """Remove what ``uid`` left in the world-writable folders (possible only without Landlock), so nothing of it
    reaches the next student. Its user could create entries only at their top level, or inside its own."""
    for folder in SHARED_FOLDERS:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    remove_tree(entry.path)
                else:
                    os.unlink(entry.path)
            except OSError:
                pass
