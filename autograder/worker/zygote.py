"""A warm worker factory, run inside the sandbox: ``python -m worker.zygote CONTROL_FD...``.

It makes itself PID 1 of a PID namespace owned by a user namespace of its
own, imports torch once, warms it up, makes itself non-dumpable, and then
forks one worker per request, straight into a fresh PID namespace (one fork
per worker: no process stands between the zygote and the worker). Each forked
worker gets, before any student code runs, its own user, mount and PID
namespaces (so it is PID 1 of a namespace that dies with it, and cannot see or
signal the zygote or earlier workers), its own IPC and UTS namespaces (no
System V or POSIX shared memory, message queue or host name is shared with any
other worker, and all of it is gone with the worker), its judge's network
namespace (shared only with that judge's earlier workers, whose sockets died
with them; one no worker can change, :func:`lane_network`), a private ``/tmp``
and ``/dev/shm`` (size capped; its files, sent over its pipe, vanish when it
ends), an empty ``/proc``, no capabilities and the per-submission rlimits.

With ``--sandbox uid`` (no namespaces to be had) the zygote runs as root in no sandbox: it locks itself and
each worker it forks confines itself to a user of its own instead (:mod:`.uid_zygote`).

Control messages are JSON over SOCK_SEQPACKET sockets, one per judge it serves
(``grade --jobs N`` shares one zygote between the judges forked from the first);
a spawn request carries the worker's three pipe ends as passed file
descriptors. A judge can reach only the workers it spawned; the zygote ends
when its last judge has gone, and kills what each judge left behind.
"""

import gc
import json
import os
import select
import signal
import socket
import sys
import threading
import time

from . import linux, uid_zygote
from .contract import Contract, copies
from .preload import PRELOAD_ENV, preload_notebook, preloaded

SUBMISSION = "/tmp/submission"
JUDGES_ENV = "GRADER_JUDGES"  # how many judges will spawn workers from this zygote (the judge's word)


def _send(control, message):
    control.send(json.dumps(message).encode())


def _runtime_under_tmp():
    """Folders of the Python runtime that live under /tmp (a fresh checkout's virtual environment, say)."""
    roots = {os.path.realpath(path) for path in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    return sorted(root for root in roots if root.startswith("/tmp/"))


def own_pid_namespace(control_fds):
    """Make the zygote PID 1 of a new PID namespace owned by a new user namespace of its own; return a descriptor
    of that PID namespace (what lets :func:`fork_in_fresh_pid_namespace` give each worker a fresh one).

    Creating a PID namespace for each worker needs a capability over the namespace it is made from, which the
    zygote holds only in a namespace that its own user namespace owns. The process that called this stays
    behind, holding nothing (not the control sockets), and ends as the zygote ends; the zygote dies with it.
    """
    linux.prctl(linux.PR_SET_DUMPABLE, 1)  # our own /proc files must be writable for the id maps
    linux.unshare(linux.CLONE_NEWUSER | linux.CLONE_NEWPID)
    linux.map_to_self()
    pid = os.fork()
    if pid:
        for fd in control_fds:
            os.close(fd)
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        os._exit(code if code >= 0 else 128 - code)
    linux.prctl(linux.PR_SET_PDEATHSIG, signal.SIGKILL)
    return os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)


def fork_in_fresh_pid_namespace(pidns):
    """``os.fork()`` with the child PID 1 of a PID namespace of its own (``pidns``: the zygote's own, from
    :func:`own_pid_namespace`). ``unshare`` places the next child only, and the kernel allows it once per
    namespace entered, so the zygote enters its own namespace again on both sides: any other child it ever has
    (an import that starts a helper, say) is born beside it, never in a worker's namespace."""
    linux.setns(pidns, linux.CLONE_NEWPID)
    linux.unshare(linux.CLONE_NEWPID)
    pid = os.fork()
    if pid:
        linux.setns(pidns, linux.CLONE_NEWPID)
    return pid


def lane_network():
    """A network namespace for one judge's workers, which run one after another: a descriptor of it, or None where
    the kernel refuses one (each worker then makes its own). Made by a thread, so the zygote stays in its own.

    Owned by the zygote's user namespace, where a worker (in a user namespace of its own below it) holds no
    capability: it cannot bring the loopback device up, add one, or change anything else there, and what its
    sockets were dies with its processes, before the next worker of that judge runs any student code. Workers of
    different judges, which run at the same time, are in different ones. A new namespace per worker cost the kernel
    time for every student (its ``cleanup_net``, on a kernel worker thread)."""
    made = []

    def make():
        try:
            linux.unshare(linux.CLONE_NEWNET)
            made.append(os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC))
        except OSError:
            pass

    thread = threading.Thread(target=make)
    thread.start()
    thread.join()
    return made[0] if made else None


def _isolate(tmp_bytes, network=None):
    """In the forked child, already PID 1 of a fresh PID namespace: new user, mount, IPC and UTS namespaces, the
    judge's lane ``network`` namespace (:func:`lane_network`; a new one where it is None), a private /tmp and
    /dev/shm, and an empty /proc. Every place a worker can write is a size-capped tmpfs of its own mount
    namespace."""
    linux.prctl(linux.PR_SET_DUMPABLE, 1)  # our own /proc files must be writable for the id maps
    if network is not None:  # while this process still holds the zygote's capabilities over it
        linux.setns(network, linux.CLONE_NEWNET)
    linux.unshare(linux.CLONE_NEWUSER | linux.CLONE_NEWNS | linux.CLONE_NEWIPC | linux.CLONE_NEWUTS
                  | (0 if network is not None else linux.CLONE_NEWNET))
    linux.map_to_self()
    linux.mount(None, "/", None, linux.MS_REC | linux.MS_PRIVATE)
    keep = _runtime_under_tmp()
    old_tmp = os.open("/tmp", os.O_PATH | os.O_DIRECTORY)  # to reach what the new /tmp will cover
    linux.mount("tmpfs", "/tmp", "tmpfs", linux.MS_NOSUID | linux.MS_NODEV, f"size={tmp_bytes},mode=1777")
    for root in keep:  # put the runtime back, read-only as it was
        os.makedirs(root, exist_ok=True)
        linux.mount(f"/proc/self/fd/{old_tmp}/{root[len('/tmp/'):]}", root, None, linux.MS_BIND | linux.MS_REC)
    os.close(old_tmp)
    if os.path.isdir("/dev/shm"):  # POSIX shared memory: one of its own, or it would outlive the worker
        linux.mount("tmpfs", "/dev/shm", "tmpfs", linux.MS_NOSUID | linux.MS_NODEV, f"size={tmp_bytes},mode=1777")
    linux.mount("tmpfs", "/proc", "tmpfs", linux.MS_NOSUID | linux.MS_NODEV | linux.MS_NOEXEC, "size=4k,mode=555")


def can_isolate(pidns):
    """Whether this kernel lets us build a worker's namespaces (tried in a throw-away child)."""
    if pidns is None:
        return False
    try:
        pid = fork_in_fresh_pid_namespace(pidns)
    except OSError:
        return False
    if pid == 0:
        try:
            _isolate(1 << 20)
            os._exit(0)
        except BaseException:  # noqa: BLE001 - any failure means "no"
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def _worker(in_fd, out_fd, output_fd, limits, contract, confined=None, uid=None):
    """PID 1 of the new namespace: receive the files, give up everything, then serve the judge. ``confined``: the
    uid zygote's plan (no namespace: the worker confines itself to ``uid`` instead)."""
    from . import protocol
    from .main import apply_limits, serve

    linux.prctl(linux.PR_SET_PDEATHSIG, signal.SIGKILL)
    if confined is None:
        linux.drop_capabilities()
    os.setsid()
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(output_fd, 1)
    os.dup2(output_fd, 2)
    os.close(null)
    os.close(output_fd)
    message, blobs = protocol.receive(in_fd, time.monotonic() + 30)
    files = {name + ".py": data for name, data in zip(message.get("files", []), blobs, strict=True)
             if name in contract.modules}
    if confined is not None:  # --sandbox uid: its own folder, rlimits and confinement (uid_zygote.enter)
        return serve(uid_zygote.enter(confined, uid, files, limits), in_fd, out_fd, contract)
    os.mkdir(SUBMISSION, 0o755)
    for name, data in files.items():
        with open(os.path.join(SUBMISSION, name), "wb") as handle:
            handle.write(data)
    os.chdir("/tmp")
    apply_limits(limits)
    return serve(SUBMISSION, in_fd, out_fd, contract)


class _Child:
    """A worker as the zygote sees it: its pid (PID 1 of its own namespace) and a pidfd that names it and no later
    holder of its pid."""

    def __init__(self, pid, ending=None):
        self.pid, self.status, self.ending = pid, None, ending
        self.pidfd = os.pidfd_open(pid)

    def wait(self, seconds):
        """The worker's wait status once it has ended (None if it is still running after ``seconds``). The first
        process of a PID namespace is reaped only after every other process in it has died, so an ended worker
        has left nothing behind; a confined worker (``ending``: :class:`.uid_zygote.Ending`) has no namespace, so
        every process of its user is ended too before it counts as ended."""
        if self.status is None and select.select([self.pidfd], [], [], seconds)[0]:
            _, self.status = os.waitpid(self.pid, 0)
        if self.status is not None and self.ending is not None and not self.ending.finish():
            return None
        return self.status

    def kill(self):
        """SIGKILL the worker (and with it its whole PID namespace); one that has already ended is no error."""
        if self.status is None:
            try:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def close(self):
        """Forget it once it has ended: nothing of it is left."""
        os.close(self.pidfd)


def _describe(status):
    if os.WIFSIGNALED(status):
        return {"signal": os.WTERMSIG(status)}
    return {"code": os.WEXITSTATUS(status)}


def _spawn(controls, pidns, children, fds, message, contract, network=None, networks=(), confined=None):
    """Fork the worker of a spawn request into ``network`` (its judge's, :func:`lane_network`; ``networks``: every
    judge's, none of which it keeps open); return its pid (in the zygote, after the fork). ``confined``: the uid
    zygote's plan (a plain fork, confined to the request's ``uid`` in the child)."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork() if confined is not None else fork_in_fresh_pid_namespace(pidns)
    if pid == 0:
        code = 70
        try:
            # Nothing of the zygote's may reach the worker: its control sockets, its namespace, workers' pidfds.
            for control in controls:
                control.close()
            if pidns is not None:
                os.close(pidns)
            for child in children:
                child.close()
            in_fd, out_fd, output_fd = fds
            if confined is None:
                _isolate(int(message["limits"]["tmp_bytes"]), network)
            for lane in networks:
                os.close(lane)
            code = _worker(in_fd, out_fd, output_fd, message["limits"], contract, confined, message.get("uid"))
        finally:
            os._exit(code)
    return pid


class _Judge:
    """One judge's side of the zygote: its control socket and the workers it spawned (each judge reaches only its
    own)."""

    def __init__(self, control):
        self.control = control
        self.children, self.ended = {}, {}  # id -> _Child not yet reaped; id -> how its worker ended
        self.network = None  # its workers' network namespace (lane_network), made at its first spawn

    def end(self):
        """The judge has gone: kill what it left behind, and forget it."""
        for child in self.children.values():
            child.kill()
            if child.wait(5.0) is not None:
                child.close()
        self.control.close()
        if self.network is not None:
            os.close(self.network)


def _answer(judge, message, fds, everyone, pidns, nested, contract, confined=None):
    """Carry out one control message of ``judge`` (``everyone``: all judges, whose sockets and workers' pidfds a
    forked worker must not keep; ``confined``: the uid zygote's plan)."""
    control, children, ended = judge.control, judge.children, judge.ended
    op, ident = message.get("op"), str(message.get("id"))
    uid = message.get("uid")
    fits = confined is None or uid_zygote.valid_uid(confined, uid)  # a user of the judge's range, or no fork
    if op == "spawn" and nested and fits and len(fds) == 3 and ident not in children and ident not in ended:
        if judge.network is None and confined is None:
            judge.network = lane_network()
        try:
            pid = _spawn([other.control for other in everyone], pidns,
                         [child for other in everyone for child in other.children.values()], fds, message, contract,
                         judge.network, [other.network for other in everyone if other.network is not None],
                         confined)
        except OSError as error:
            _send(control, {"error": f"cannot fork a worker: {error.strerror}"})
            pid = None
        for fd in fds:
            os.close(fd)
        if pid is not None:
            ending = None if confined is None else uid_zygote.Ending(uid, os.path.join(confined["root"], f"u{uid}"))
            children[ident] = _Child(pid, ending)
            _send(control, {"spawned": ident, "pid": pid})  # the judge reads the worker's CPU through it
    elif op == "preload":
        _send(control, {"preloaded": preload_notebook()})
    elif op in ("kill", "status") and (ident in children or ident in ended):
        child, wait = children.get(ident), float(message.get("wait", 2.0))
        if child is not None:
            if op == "kill":
                child.kill()
            status = child.wait(wait)
            if status is not None:  # reaped: its namespace is empty
                ended[ident] = _describe(status)
                child.close()
                del children[ident]
            # else: still running after a SIGKILL (so no status in the reply): the judge replaces this sandbox
        _send(control, {"status": ended.get(ident)})
    else:
        for fd in fds:
            os.close(fd)
        _send(control, {"error": f"cannot {op} {ident}"})


def main(argv):
    from .main import prepare_torch, warm_up

    control_fds = [int(fd) for fd in argv[1:]]
    confined = json.loads(os.environ.pop("GRADER_CONFINE", "null"))  # --sandbox uid: no namespaces at all
    pidns = None
    if confined is None:
        try:
            pidns = own_pid_namespace(control_fds)
        except OSError:
            pass  # no nested namespaces here: the judge starts a sandbox per worker instead
    judges = [_Judge(socket.socket(fileno=fd)) for fd in control_fds]
    contract = Contract.from_env(os.environ)
    # What torch's import and the warm-up leave is the workers' inherited heap, kept for the zygote's life: the
    # collector is off meanwhile (its collections would walk all of it, 0.3 s of start-up), then it is frozen, so
    # a worker's collections never walk it either (a full one would write to every object's header, copying each
    # page, tens of ms a worker).
    gc.disable()
    torch, cuda = prepare_torch(int(os.environ.get("GRADER_THREADS", "1")), contract.forbidden)
    warm_up(torch)
    from .operator_watch import watch_operators  # torch's own import first (stand_ins.py)

    for path in contract.forbidden:  # a submodule torch does not import itself: imported once, not in every worker
        copies(path)  # and the other places it is kept, read once (resolve_path's import included)
    watch_operators(contract.forbidden)  # registered once: each worker says where its calls are recorded
    if os.environ.pop(PRELOAD_ENV, "") == "1":  # before the first fork: every worker of the run starts alike
        preload_notebook()
    gc.freeze()
    gc.enable()
    linux.prctl(linux.PR_SET_DUMPABLE, 0)  # workers may not trace or read the zygote
    if confined is None:
        nested = can_isolate(pidns)
    else:  # locked before any fork; a fork then confines itself (tried once here)
        confined = uid_zygote.prepare(confined)
        nested = uid_zygote.can_confine(confined, json.loads(os.environ.get("GRADER_LIMITS") or "{}"))
    hello = {"ready": True, "cuda": cuda, "torch": torch.__version__, "nested": nested,
             "notebooks": preloaded()}
    for judge in judges:
        try:
            _send(judge.control, hello)
        except OSError:
            pass  # that judge has gone already: its socket reads as closed below
    # What every worker inherits and is not in huge pages yet (malloc's heap grew in them: GLIBC_TUNABLES) moves
    # there while the zygote has nothing else to do, one huge page at a time between requests, so a judge's request
    # waits a few ms at most: about 0.1 s of CPU in all (copies into fresh memory), for fewer page-table entries to
    # copy and free at each fork and exit. Workers forked meanwhile copy more entries, and keep their own pages (a
    # collapse copies the zygote's side only). Only with a core to spare: with a judge on every core (--jobs 2 on
    # two) that CPU comes out of the first students' grading, and the bench measured runs slower with it (no
    # cheaper fork or exit showed once under way, as each worker's first writes split the huge pages it shares).
    to_collapse = _ranges() if spare_core(int(os.environ.get(JUDGES_ENV, "1"))) else []
    while judges:
        by_socket = {judge.control: judge for judge in judges}
        readable = select.select(list(by_socket), [], [], 0 if to_collapse else None)[0]
        if not readable and to_collapse:
            linux.into_huge_pages(*to_collapse.pop())
        for control in readable:
            judge = by_socket[control]
            try:
                data, fds, _, _ = socket.recv_fds(control, 1 << 16, 4)
            except OSError:
                data, fds = b"", []
            if not data:
                judge.end()
                judges.remove(judge)
                continue
            message = json.loads(data)
            try:
                _answer(judge, message, fds, judges, pidns, nested, contract, confined)
            except OSError:  # its judge went away mid-answer: the next read says so
                pass
            if to_collapse and message.get("op") == "preload":  # new mappings: the ranges read before are stale
                to_collapse = _ranges()
    return 0


def spare_core(judges):
    """Whether this process has a core that none of the ``judges`` grading beside it needs."""
    return judges < len(os.sched_getaffinity(0))


def _ranges():
    """:func:`linux.anonymous_ranges` in pieces of one huge page, or none where they cannot be read (the zygote
    serves on without them)."""
    try:
        return linux.anonymous_ranges(most=linux.HUGE_PAGE)
    except (OSError, ValueError):
        return []


if __name__ == "__main__":
    sys.exit(main(sys.argv))
