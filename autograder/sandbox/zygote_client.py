"""Workers forked from a warm zygote (:class:`Zygote`: torch imported and warmed up once, in one sandbox) over a
control socket; a :class:`ForkedWorker` is one such fork, known by its host pids; :class:`SharedZygote` lends one
zygote to the judges forked from one process.
"""

import collections
import json
import os
import select
import socket
import time
from dataclasses import asdict

from . import clocks
from . import isolation as sandboxes
from ..worker import protocol
from ..worker.zygote import JUDGES_ENV
from .channel import CappedOutput, Channel, describe_exit, widen
from .confined import next_uid
from .worker_process import Sandboxed, end_user, processes_of


KILLS = "kills"  # Zygote.settle: up to the last kill sent
ZYGOTE_DEPTH = 2  # the zygote's PID namespace, counted from ours: bwrap's sandbox, then the zygote's own


class ForkedWorker(Channel):
    """A worker forked by a :class:`Zygote`, in namespaces of its own inside the zygote's sandbox.

    ``inner`` is the zygote's pid for the worker (the zygote's word, which no worker can touch); the judge maps it
    to a host pid through ``NSpid`` below the zygote sandbox's first process (the zygote's PID namespace is the
    second inside ours: bwrap's, then its own)."""

    def __init__(self, zygote, ident, to_worker, from_worker, output, inner=None, uid=None):
        super().__init__(to_worker, from_worker, output)
        self.zygote, self.ident, self.hello = zygote, ident, zygote.hello
        self.inner, self.root = inner, None
        self.uid = uid  # --sandbox uid: its own user (no namespace: the zygote's pid for it is a host pid)
        self.spawned = inner is not None  # the zygote's reply to the spawn request has been read
        self.started = False  # ready() has confirmed it may run student code
        self.spawn_error = None  # why the zygote could not fork it, if it could not

    def settle(self, reply):
        """Take the zygote's reply to this worker's spawn request (read in order, after it was sent)."""
        self.spawned = True
        if reply.get("spawned") == self.ident:
            self.inner = reply.get("pid")
        else:
            self.spawn_error = f"the zygote could not start a worker: {str(reply.get('error'))[:200]}"

    def _root(self):
        if not self.spawned:
            self.zygote.settle(self)
        if self.root is None and isinstance(self.inner, int) and self.uid is not None:
            self.root = self.inner
        elif self.root is None and isinstance(self.inner, int) and self.zygote.sandboxed.first_pid is not None:
            self.root = clocks.host_pid(self.zygote.sandboxed.first_pid, self.inner, ZYGOTE_DEPTH)
        return self.root

    def _main_pid(self):
        return self._root()  # None until forked: its CPU so far is nil

    def _pids(self):
        root = self._root()
        if root is None:
            return []
        if self.uid is None:  # a namespace's tree, read from its root down: every process of it is below the root
            return clocks.tree(root)
        # A confined worker's processes may leave its tree (a double fork), never its user: every process is read.
        links = clocks.parents()
        pids = clocks.tree(root, links)
        return pids + processes_of(self.uid, [pid for pid in links if pid not in pids])

    def ready(self, deadline):
        """The zygote's hello, once this worker is forked and every worker stopped before it is confirmed gone
        (so nothing of an earlier student runs beside this one's code)."""
        if not self.zygote.alive:
            raise protocol.ChannelClosed("its zygote is gone")
        if not self.started:
            self.zygote.settle(self)
            self.zygote.settle(KILLS)
            if self.spawn_error:
                raise protocol.ChannelClosed(self.spawn_error)
            if self.zygote.retired:
                raise protocol.ChannelClosed("an earlier worker's end could not be confirmed; its zygote is replaced")
            self.take_share()
            self.started = True
        return self.hello

    def exit_detail(self):
        status = self.zygote.status(self.ident)
        if status is None:
            return "it stopped answering"
        return describe_exit(-status["signal"] if "signal" in status else status["code"])

    def close(self):
        """Stop the worker. The zygote kills it while the judge goes on (writing the result, preparing the
        next student); the next worker's :meth:`ready` reads the confirmation before that worker runs any code."""
        self._close_pipes()
        if not self.spawned:
            self.zygote.settle(self)
        if self.spawn_error:  # never forked: nothing to end
            self.output.join(timeout=5)
            return
        self.output.settle()  # its prints so far; it may still be ending
        if self.zygote.alive:
            self.zygote.kill_later(self.ident)


class Zygote:
    """The judge's handle on a warm worker factory running in one long-lived sandbox.

    Starting it costs a torch import once; each worker it forks then costs a few milliseconds.
    """

    def __init__(self, sandbox, scratch_dir, extra_env=None, lend=0):
        """``lend``: control sockets (``lent``) for that many judges forked from this process, which share it."""
        self.sandbox = sandbox
        pairs = [socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET) for _ in range(1 + lend)]
        (self.control, _), self.lent = pairs[0], [ours for ours, _ in pairs[1:]]
        theirs = [their.fileno() for _, their in pairs]
        try:
            # How many judges will grade with it: beside fewer judges than cores it has a core to itself.
            env = dict(extra_env or {}, **{JUDGES_ENV: str(max(lend, 1))})
            self.sandboxed = Sandboxed(sandbox, lambda info: sandboxes.zygote_command(
                sandbox, theirs, scratch_dir, info_fd=info, extra_env=env), theirs)
        finally:
            for _, their in pairs:
                their.close()
        self.process = self.sandboxed.process
        self.log = CappedOutput(self.process.stdout, 8192)
        self.hello = None
        self.count = 0
        self.preloaded = False
        self.users = {}  # --sandbox uid: ident -> the user of each worker whose end the zygote has not confirmed
        # Workers whose spawn request is sent and whose reply is not read yet, oldest first: the zygote answers
        # in order, so the judge goes on while it forks and reads the reply before its next request's.
        self.unsettled = collections.deque()
        self.retired = False  # a kill it could not confirm: replaced before it forks another worker

    def _receive(self, timeout):
        try:
            self.control.settimeout(timeout)
            data = self.control.recv(1 << 16)
        except (socket.timeout, OSError) as error:
            raise protocol.ChannelClosed(f"the zygote did not answer ({error})") from None
        if not data:
            raise protocol.ChannelClosed("the zygote ended")
        return json.loads(data)

    def ready(self, deadline):
        """The zygote's hello, waited for until ``deadline`` (``time.monotonic()`` seconds, as for a worker)."""
        if self.hello is None:
            self.hello = self._receive(max(0.0, deadline - time.monotonic()))
            self.sandboxed.watch()
        return self.hello

    @property
    def alive(self):
        return self.process.poll() is None

    @property
    def usable(self):
        return self.process.poll() is None and bool(self.hello and self.hello.get("nested"))

    def spawn(self, files, limits):
        """Fork a worker for the student ``files`` (``{module: bytes}``) and send it those files. Returns at once:
        the zygote forks while the judge grades the previous student, and its reply is read later
        (:meth:`settle`)."""
        self.count += 1
        ident = str(self.count)
        to_worker_r, to_worker = os.pipe()
        from_worker, from_worker_w = os.pipe()
        widen(from_worker)
        output_r, output_w = os.pipe()
        request = {"op": "spawn", "id": ident, "limits": asdict(limits)}
        if self.sandbox.mode == "uid":  # the judge names each worker's user: it ends that user's processes itself
            request["uid"] = self.users[ident] = next_uid()  # if the zygote cannot
        try:
            socket.send_fds(self.control, [json.dumps(request).encode()], [to_worker_r, from_worker_w, output_w])
        except OSError:
            for fd in (to_worker, from_worker, output_r):
                os.close(fd)
            raise
        finally:
            for fd in (to_worker_r, from_worker_w, output_w):
                os.close(fd)
        output = CappedOutput(os.fdopen(output_r, "rb"), limits.output_bytes)
        names = sorted(files)
        worker = ForkedWorker(self, ident, to_worker, from_worker, output, uid=request.get("uid"))
        self.unsettled.append(worker)
        try:  # the worker reads its files before any student code runs; a deadline all the same
            protocol.send(to_worker, {"files": names}, [files[name] for name in names], time.monotonic() + 30)
        except protocol.ProtocolError:
            worker.close()
            raise
        return worker

    def settle(self, until=None):
        """Read the replies to the requests sent without waiting, oldest first: up to the worker ``until``'s
        spawn, up to the last kill (``until=KILLS``), or all (``None``). Each spawned worker's pid (or why it was
        not forked), each killed worker's end. A kill the zygote could not confirm retires this whole
        sandbox: the factory tears it down before it starts the next worker, so nothing of that worker outlives
        the student after next, and starts a fresh zygote (a worker already forked here and not yet used is
        replaced, at no cost to its student)."""
        while self.unsettled:
            if until is KILLS and all(isinstance(waiting, ForkedWorker) for waiting in self.unsettled):
                return
            waiting = self.unsettled[0]
            try:
                reply = self._receive(10)
            except protocol.ProtocolError as error:
                reply = {"error": str(error)}
            self.unsettled.popleft()
            if isinstance(waiting, ForkedWorker):
                waiting.settle(reply)
                if waiting is until:
                    return
            elif reply.get("status") is None:
                self.retired = True
            else:
                self.users.pop(waiting, None)  # ended: nothing of its user is left

    def kill_later(self, ident):
        """Ask the zygote to kill worker ``ident`` without waiting for its answer (see :meth:`settle`)."""
        try:
            self.control.send(json.dumps({"op": "kill", "id": ident, "wait": 5.0}).encode())
        except OSError:
            self.retired = True
            return
        self.unsettled.append(ident)

    def preload(self):
        """Have the zygote import what notebooks need, once, before it forks any worker of a run that grades
        notebooks (a zygote started to do so at its start already has: its hello says so)."""
        if not self.preloaded and (self.hello or {}).get("notebooks"):
            self.preloaded = True
        if not self.preloaded:
            self.preloaded = True
            self.settle()
            try:
                self.control.send(json.dumps({"op": "preload", "id": "0"}).encode())
                self._receive(120)
            except (OSError, protocol.ProtocolError):
                pass

    def _ask(self, message):
        self.settle()
        try:
            self.control.send(json.dumps(message).encode())
            status = self._receive(10).get("status")
        except (OSError, protocol.ProtocolError):
            return None
        if status is not None:
            self.users.pop(message["id"], None)
        return status

    def status(self, ident):
        return self._ask({"op": "status", "id": ident, "wait": 2.0})

    def kill(self, ident):
        return self._ask({"op": "kill", "id": ident, "wait": 5.0})

    def _end_users(self):
        """--sandbox uid: end the users of the workers whose end the zygote did not confirm (it is gone, or it
        was not asked): without a PID namespace, nothing else would end what they started."""
        for uid in self.users.values():
            end_user(uid)
        self.users.clear()

    def close(self):
        self.control.close()
        for lent in self.lent:
            lent.close()
        self.sandboxed.end()
        self._end_users()
        self.log.join(timeout=5)


class _Watched:
    """A process seen through a pidfd: ``poll()`` as ``Popen.poll`` (None while it runs)."""

    def __init__(self, pidfd):
        self.pidfd = pidfd

    def poll(self):
        return 0 if self.pidfd is None or select.select([self.pidfd], [], [], 0)[0] else None


class _Lent:
    """What a judge sharing another judge's zygote knows of that sandbox: its first process's host pid."""

    def __init__(self, first_pid):
        self.first_pid = first_pid

    def watch(self, timeout=2.0):
        pass


class SharedZygote(Zygote):
    """A forked judge's handle on the zygote of the process that forked it (``grade --jobs N``): a control socket
    of its own, so it reaches only the workers it spawns; the sandbox stays that process's, which ends it after
    every judge it forked has finished. Lost or retired, it is replaced by a zygote of this judge's own."""

    def __init__(self, sandbox, control, first_pid, pidfd):
        self.sandbox, self.control, self.lent = sandbox, control, []
        self.sandboxed, self.process, self.log = _Lent(first_pid), _Watched(pidfd), None
        self.hello, self.count, self.preloaded, self.retired = None, 0, False, False
        self.unsettled, self.users = collections.deque(), {}

    def close(self):
        self.control.close()  # the zygote ends what this judge left behind; the sandbox is not ours to end
        if not self.alive:  # unless it is gone: then this judge ends its workers' users itself
            self._end_users()
