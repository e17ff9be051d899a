"""A warm worker factory, run inside the sandbox: ``python -m worker.zygote CONTROL_FD``.

It imports torch once, warms it up, makes itself non-dumpable, and then forks
one worker per request. Each forked worker gets, before any student code
runs, its own user, mount and PID namespaces (so it is PID 1 of a namespace
that dies with it, and cannot see or signal the zygote or earlier workers),
its own IPC, network and UTS namespaces (no System V or POSIX shared memory,
message queue, socket or host name is shared with any other worker, and all
of it is gone with the worker), a private ``/tmp`` and ``/dev/shm`` (size
capped; its files, sent over its pipe, vanish when it ends), an empty
``/proc``, no capabilities and the per-submission rlimits.

Control messages are JSON over a SOCK_SEQPACKET socket; a spawn request
carries the worker's three pipe ends as passed file descriptors.
"""

import json
import os
import select
import signal
import socket
import struct
import sys
import time

from . import linux
from .contract import Contract

SUBMISSION = "/tmp/submission"
STATUS = struct.Struct("<i")  # a wait status, as os.waitpid returns it


def _send(control, message):
    control.send(json.dumps(message).encode())


def _runtime_under_tmp():
    """Folders of the Python runtime that live under /tmp (a fresh checkout's virtual environment, say)."""
    roots = {os.path.realpath(path) for path in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    return sorted(root for root in roots if root.startswith("/tmp/"))


def _isolate(tmp_bytes):
    """In the forked child: new user, mount, PID, IPC, network and UTS namespaces, a private /tmp and /dev/shm,
    and an empty /proc. Every place a worker can write is a size-capped tmpfs of its own mount namespace."""
    linux.prctl(linux.PR_SET_DUMPABLE, 1)  # our own /proc files must be writable for the id maps
    linux.unshare(linux.CLONE_NEWUSER | linux.CLONE_NEWNS | linux.CLONE_NEWPID | linux.CLONE_NEWIPC
                  | linux.CLONE_NEWNET | linux.CLONE_NEWUTS)
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


def can_isolate():
    """Whether this kernel lets us build a worker's namespaces (tried in a throw-away child).

    """
    pid = os.fork()
    if pid == 0:
        try:
            _isolate(1 << 20)
            os._exit(0)
        except BaseException:  # noqa: BLE001 - any failure means "no"
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def _worker(in_fd, out_fd, output_fd, limits, contract):
    """PID 1 of the new namespace: receive the files, give up everything, then serve the judge."""
    from . import protocol
    from .main import apply_limits, serve

    linux.prctl(linux.PR_SET_PDEATHSIG, signal.SIGKILL)
    linux.drop_capabilities()
    os.setsid()
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(output_fd, 1)
    os.dup2(output_fd, 2)
    os.close(null)
    os.close(output_fd)
    message, blobs = protocol.receive(in_fd, time.monotonic() + 30)
    os.mkdir(SUBMISSION, 0o755)
    for name, data in zip(message.get("files", []), blobs, strict=True):
        if name in contract.modules:
            with open(os.path.join(SUBMISSION, name + ".py"), "wb") as handle:
                handle.write(data)
    os.chdir("/tmp")
    apply_limits(limits)
    return serve(SUBMISSION, in_fd, out_fd, contract)


def _spawn(fds, message, report, contract):
    """In the zygote's child: isolate, fork the worker (PID 1 inside), wait for it and report how it ended.

    The worker's wait status goes to the zygote over ``report`` (a pipe) as soon as it is known: by then the
    worker and everything in its PID namespace are gone, and the zygote need not wait for this process's own
    (slower) exit.
    """
    in_fd, out_fd, output_fd = fds
    # Asked to stop (SIGTERM from the zygote), this process kills the worker and still waits for it. The zygote
    # forked it with SIGTERM blocked, and it stays blocked until the handler is in place: a stop that comes
    # early (even before the worker exists) waits for it rather than ending this process unreported.
    _isolate(int(message["limits"]["tmp_bytes"]))
    pid = os.fork()
    if pid == 0:
        code = 70
        try:
            os.close(report)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
            code = _worker(in_fd, out_fd, output_fd, message["limits"], contract)
        finally:
            os._exit(code)
    # The stop may arrive just as the worker ends on its own (the judge closed its pipes): the handler then
    # runs after the waitpid below has reaped it. A pidfd names this worker and no later holder of its pid.
    pidfd = os.pidfd_open(pid)
    signal.signal(signal.SIGTERM, lambda signum, frame: _kill_quietly(pidfd))
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    for fd in fds:
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    os.write(report, STATUS.pack(status))
    return 0


def _kill_quietly(pidfd):
    """SIGKILL the process behind ``pidfd``; one that has already ended (and been reaped) is no error."""
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _describe(status):
    if os.WIFSIGNALED(status):
        return {"signal": os.WTERMSIG(status)}
    return {"code": os.WEXITSTATUS(status)}


class _Child:
    """A worker's parent process as the zygote sees it: its pid and the pipe on which it reports the worker's end."""

    def __init__(self, pid, report):
        self.pid, self.report, self.status, self.lost = pid, report, None, False

    def wait(self, seconds):
        """The worker's wait status once it has ended (None if it is still running after ``seconds``)."""
        if self.status is None and not self.lost and select.select([self.report], [], [], seconds)[0]:
            data = os.read(self.report, STATUS.size)
            if len(data) == STATUS.size:
                self.status = STATUS.unpack(data)[0]
            else:  # the parent ended without reporting (killed by force): how the worker ended is unknown
                self.lost = True
        return self.status

    def reap(self):
        """Collect the parent's exit once it has happened; True when nothing of this child is left."""
        if self.pid is not None and os.waitpid(self.pid, os.WNOHANG)[0]:
            self.pid = None
        if self.pid is None and self.report is not None:
            os.close(self.report)
            self.report = None
        return self.pid is None


def preload_notebook():
    """Import, once for every notebook worker forked later, what running a notebook needs: IPython's input
    transformations and shell, and matplotlib with its non-interactive backend (its font cache built once)."""
    os.environ["MPLBACKEND"] = "Agg"
    try:
        import IPython.core.inputtransformer2  # noqa: F401
        import IPython.core.interactiveshell  # noqa: F401
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot  # noqa: F401
    except Exception:  # noqa: BLE001 - a notebook that needs them will say so in its own outputs
        return False
    return True


def main(argv):
    from .main import prepare_torch, warm_up

    control = socket.socket(fileno=int(argv[1]))
    contract = Contract.from_env(os.environ)
    torch, cuda = prepare_torch(int(os.environ.get("GRADER_THREADS", "1")))
    warm_up(torch)
    nested = can_isolate()
    linux.prctl(linux.PR_SET_DUMPABLE, 0)  # workers may not trace or read the zygote
    _send(control, {"ready": True, "cuda": cuda, "torch": torch.__version__, "nested": nested})
    children, ended = {}, {}  # id -> _Child still to be reaped; id -> how its worker ended
    while True:
        data, fds, _, _ = socket.recv_fds(control, 1 << 16, 4)
        if not data:
            return 0
        message = json.loads(data)
        op, ident = message.get("op"), str(message.get("id"))
        if op == "spawn" and nested and len(fds) == 3:
            sys.stdout.flush()
            sys.stderr.flush()
            report, report_w = os.pipe()
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})  # for the child; see _spawn
            pid = os.fork()
            if pid == 0:
                code = 70
                try:
                    # Nothing of the zygote's may reach the worker: its control socket, other children's reports.
                    control.close()
                    for fd in [report] + [child.report for child in children.values() if child.report is not None]:
                        os.close(fd)
                    code = _spawn(fds, message, report_w, contract)
                finally:
                    os._exit(code)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
            for fd in (*fds, report_w):
                os.close(fd)
            children[ident] = _Child(pid, report)
            _send(control, {"spawned": ident, "pid": pid})  # the judge reads the worker's CPU through it
        elif op == "preload":
            _send(control, {"preloaded": preload_notebook()})
        elif op in ("kill", "status") and (ident in children or ident in ended):
            child, wait = children.get(ident), float(message.get("wait", 2.0))
            if child is not None and ident not in ended:
                if op == "kill" and child.pid is not None:
                    os.kill(child.pid, signal.SIGTERM)  # it kills its worker and reports after it (see _spawn)
                status = child.wait(wait)
                if status is None and op == "kill" and child.pid is not None:
                    # Stuck: the parent goes by force and its worker with it, but nothing here can confirm that
                    # the worker's namespace is gone; the reply says so (no status) and the judge replaces this
                    # whole sandbox.
                    os.kill(child.pid, signal.SIGKILL)
                    child.lost = True
                if status is not None:
                    ended[ident] = _describe(status)
            _send(control, {"status": ended.get(ident)})
        else:
            for fd in fds:
                os.close(fd)
            _send(control, {"error": f"cannot {op} {ident}"})
        for done in [key for key, child in children.items() if (key in ended or child.lost) and child.reap()]:
            del children[done]


if __name__ == "__main__":
    sys.exit(main(sys.argv))
