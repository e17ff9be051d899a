"""How a judge starts workers: one sandbox per worker, or forks of a warm zygote inside one sandbox.

:class:`WorkerFactory` picks the fast path when it can: a :class:`Zygote`
(torch imported and warmed up once) forks each worker into namespaces of its
own. Where the kernel does not allow that, or without bwrap, every worker is a
:class:`WorkerProcess` in a sandbox of its own, started ahead of time so its
start-up overlaps the previous student's tests.
"""

import collections
import contextlib
import fcntl
import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import termios
import threading
import time
from dataclasses import asdict
from pathlib import Path

from . import clocks, core_pairing, cpu_share
from . import isolation as sandboxes
from . import strays
from ..intake.submission import stage
from ..worker import protocol
from ..worker.contract import ENV as CONTRACT_ENV
from ..worker.main import WARM_UP_ENV


class _CappedOutput(threading.Thread):
    """Drains a pipe, keeping the first ``cap`` bytes (the student's prints) and counting the rest."""

    def __init__(self, stream, cap):
        super().__init__(daemon=True)
        self.stream, self.cap, self.kept, self.dropped = stream, cap, bytearray(), 0
        self.fd = stream.fileno()
        self.lock = threading.Lock()  # held while a chunk is read and kept: see settle
        self.start()

    def run(self):
        while True:
            select.select([self.fd], [], [])
            with self.lock:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:
                    chunk = b""
                room = self.cap - len(self.kept)
                self.kept += chunk[:room]
                self.dropped += max(0, len(chunk) - room)
            if not chunk:
                break
        self.stream.close()

    def settle(self, seconds=2.0):
        """Wait (up to ``seconds``) until everything written to the pipe so far is kept: a worker flushes its
        prints before each reply, so after its last reply this is all it printed, and it need not have ended."""
        end = time.monotonic() + seconds
        while self.is_alive() and time.monotonic() < end:
            with self.lock:
                try:
                    unread = struct.unpack("i", fcntl.ioctl(self.fd, termios.FIONREAD, b"\0\0\0\0"))[0]
                except OSError:  # closed: the reader has finished
                    return
                if not unread:
                    return
            time.sleep(0.0005)

    def text(self):
        text = self.kept.decode("utf-8", "replace")
        return text + (f"\n[... {self.dropped} more bytes of output not kept]" if self.dropped else "")


class _Channel:
    """Request/reply over a worker's two pipes; each request carries a nonce its reply must echo."""

    hello = None

    cpu_start = 0.0  # the main process's CPU before any student code ran (a torch import, say)
    last_cpu = 0.0  # the latest cpu_mark
    shares = None  # the factory's cpu_share.CpuShares, where cgroups v2 give each worker a CPU share
    share = None  # this worker's group there, once placed
    core = None  # its judge's core (core_pairing), where the judge has one of its own

    def __init__(self, to_worker, from_worker, output):
        self._to_worker, self._from_worker, self.output = to_worker, from_worker, output
        self.imported = set()
        self._stat = None  # clocks.StatFile of the worker's main process, once known
        os.set_blocking(to_worker, False)  # writes wait for the worker with the call's deadline, never forever
        os.set_blocking(from_worker, False)  # reads too; a reply already there is read without a wait (protocol)

    def request(self, message, blobs, deadline, max_reply=protocol.MAX_BLOB):
        """Send one request and read its reply, both before ``deadline``; a reply over ``max_reply`` bytes is
        refused unread."""
        return self.receive(self.send(message, blobs, deadline), deadline, max_reply)

    def send(self, message, blobs, deadline):
        """Send one request (before ``deadline``); return its nonce, which :meth:`receive` checks."""
        nonce = os.urandom(8).hex()
        protocol.send(self._to_worker, dict(message, nonce=nonce), blobs, deadline)
        return nonce

    def replied(self, seconds):
        """Whether a reply has begun to arrive, waiting up to ``seconds`` for it (reads nothing)."""
        return bool(select.select([self._from_worker], [], [], max(seconds, 0.0))[0])

    def receive(self, nonce, deadline, max_reply=protocol.MAX_BLOB):
        """The reply to the request ``nonce``, read before ``deadline``."""
        reply, reply_blobs = protocol.receive(self._from_worker, deadline, min(max_reply, protocol.MAX_JSON),
                                              max_reply)
        if reply.get("nonce") != nonce:
            raise protocol.ProtocolError("a reply that answers no request")
        return reply, reply_blobs

    # ------------------------------------------------------------ CPU time, read from outside (clocks.py)

    def _main_pid(self):
        """The host pid of the process that runs student code (None while unknown)."""
        return None

    def _pids(self):
        """Host pids of the worker's whole tree."""
        return []

    def cpu_mark(self):
        """CPU seconds of the worker's main process so far (one ``pread``); 0 before it is known."""
        if self._stat is None:
            pid = self._main_pid()
            if pid is None:
                return 0.0
            try:
                self._stat = clocks.StatFile(pid)
            except OSError:
                return 0.0
        value = self._stat.cpu()
        if value is not None:
            self.last_cpu = value
        return self.last_cpu

    def take_share(self):
        """Move the worker into a CPU group of its own, and onto its judge's core where the judge has one (before
        its first request: its children and threads follow it)."""
        placing = self.shares is not None and self.share is None
        pid = self._main_pid() if placing or self.core is not None else None
        if pid is None:
            return
        if placing:
            self.share = self.shares.place(pid)
        core_pairing.place(pid, self.core)

    def usage(self):
        """A :class:`clocks.Usage` of the worker's whole tree (a scan of ``/proc``: read while waiting only)."""
        return clocks.usage(self._pids())

    def precise_cpu(self):
        """CPU seconds of the worker's whole tree to the nanosecond (:func:`clocks.precise_cpu`), for a measured
        call."""
        return clocks.precise_cpu(self._pids())

    def _close_pipes(self):
        if self._stat is not None:
            self._stat.close()
        for fd in (self._to_worker, self._from_worker):
            try:
                os.close(fd)
            except OSError:
                pass


def _describe_exit(code):
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class _Sandboxed:
    """A process started in a bwrap sandbox (or plainly, with ``--sandbox none``), and how to end all of it.

    bwrap writes (``--info-fd``) the host pid of the sandbox's first process; the first process of a PID
    namespace ends only after every other process in it, so its end, seen through a pidfd taken while it
    surely lived, is the sandbox's end. bwrap's own process may exit before that.
    """

    def __init__(self, sandbox, command, pass_fds):
        """``command(info_fd)`` gives ``(argv, env, cwd)``; ``pass_fds`` are the descriptors it talks over."""
        self.info, self.pidfd, self.first_pid = None, None, None
        info_w = None
        if sandbox.mode == "bwrap":
            self.info, info_w = os.pipe()
        argv, env, cwd = command(info_w)
        self.uid = sandboxes.confined_uid(env)  # --sandbox uid: every process of this user is the worker's
        self.unisolated = sandbox.mode == "none"  # what it leaves behind comes to this process (strays)
        try:
            if self.unisolated:
                strays.adopt_orphans()
            self.process = subprocess.Popen(
                argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                pass_fds=tuple(pass_fds) + (() if info_w is None else (info_w,)), start_new_session=True,
            )
            if self.unisolated:
                strays.started(self.process.pid)
        except BaseException:
            self._close_info()
            raise
        finally:
            if info_w is not None:
                os.close(info_w)

    def watch(self, timeout=2.0):
        """Take a pidfd of the sandbox's first process (call while it is known to be alive)."""
        if self.info is None or self.pidfd is not None:
            return
        data, deadline = b"", time.monotonic() + timeout
        while time.monotonic() < deadline and select.select([self.info], [], [], deadline - time.monotonic())[0]:
            chunk = os.read(self.info, 4096)
            if not chunk:
                break
            data += chunk
            with contextlib.suppress(ValueError):
                pid = json.loads(data).get("child-pid")
                if isinstance(pid, int):
                    with contextlib.suppress(OSError):
                        self.pidfd = os.pidfd_open(pid)
                        self.first_pid = pid
                break

    def end(self):
        """Kill the sandbox and wait for all of it."""
        if self.pidfd is not None:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)  # bwrap; the sandbox dies with it (--die-with-parent)
        self.process.wait()
        if self.pidfd is not None:
            select.select([self.pidfd], [], [], 5.0)
            os.close(self.pidfd)
            self.pidfd = None
        if self.uid is not None:
            end_user(self.uid)
        if self.unisolated:
            strays.ended(self.process.pid)
            strays.end_strays()
        self._close_info()

    def _close_info(self):
        if self.info is not None:
            os.close(self.info)
            self.info = None


def end_user(uid, rounds=50):
    """Kill every process of ``uid`` (a confined worker's own user) and wait until none is left.

    Without a PID namespace this is how "ended" is made true: a child that becomes ``uid`` and signals -1 reaches
    every process of that user and nothing else (the kernel's rule for kill(-1) by an unprivileged process);
    repeated until the kernel finds none to signal (ESRCH), so a process forked meanwhile is caught too.
    """
    for _ in range(rounds):
        child = os.fork()
        if child == 0:
            code = 1
            try:
                os.setgroups([])
                os.setresgid(uid, uid, uid)
                os.setresuid(uid, uid, uid)
                try:
                    os.kill(-1, signal.SIGKILL)
                except ProcessLookupError:
                    code = 0  # nothing of this user left
            finally:
                os._exit(code)
        _, status = os.waitpid(child, 0)
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
            _remove_owned(uid)
            return True
        time.sleep(0.01)
    return False


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
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
            except OSError:
                pass


class WorkerProcess(_Channel):
    """A worker in a sandbox of its own (one bwrap per worker). ``ready`` waits for its hello."""

    def __init__(self, sandbox, submission_dir, scratch_dir, extra_env=None):
        to_worker_r, to_worker = os.pipe()
        from_worker, from_worker_w = os.pipe()
        _widen(from_worker)
        try:
            self.sandboxed = _Sandboxed(sandbox, lambda info: sandboxes.worker_command(
                sandbox, submission_dir, to_worker_r, from_worker_w, scratch_dir, info_fd=info, extra_env=extra_env),
                (to_worker_r, from_worker_w))
        finally:
            os.close(to_worker_r)
            os.close(from_worker_w)
        self.process = self.sandboxed.process
        super().__init__(to_worker, from_worker, _CappedOutput(self.process.stdout, sandbox.limits.output_bytes))

    def ready(self, deadline):
        """The worker's hello, waited for until ``deadline`` (``time.monotonic()`` seconds) the first time."""
        if self.hello is None:
            message, _ = protocol.receive(self._from_worker, deadline)
            if message.get("ready") is not True:
                raise protocol.ProtocolError("the worker did not say hello")
            self.hello = message
            self.sandboxed.watch()  # no student code has run yet: the sandbox's first process is alive
            self.cpu_start = self.cpu_mark()  # its start-up (a torch import) is not the submission's
            self.take_share()
        return self.hello

    def _main_pid(self):
        first = self.sandboxed.first_pid
        if first is None:  # no sandbox of its own (uid, none): the process started is the worker
            return self.process.pid
        inner = clocks.children(first)  # bwrap's init is the sandbox's first process; the worker its child
        return inner[0] if len(inner) == 1 else None

    def _pids(self):
        root = self.sandboxed.first_pid or self.process.pid
        links = clocks.parents()
        pids = clocks.tree(root, links)
        if self.sandboxed.uid is not None:  # a confined worker's processes may leave the tree; never its user
            pids += [pid for pid in links if pid not in pids and _owner(pid) == self.sandboxed.uid]
        return pids

    def exit_detail(self):
        """Why the process ended, in words (waits briefly for it)."""
        try:
            return _describe_exit(self.process.wait(timeout=2))
        except subprocess.TimeoutExpired:
            return "it stopped answering"

    def close(self):
        self._close_pipes()
        self.sandboxed.end()
        self.output.join(timeout=5)


def _widen(fd):
    """Let a pipe hold a megabyte (Linux's default cap for any user): a big tensor crosses in a few writes, not
    a hundred 64 KiB ones, each a switch between the worker and the judge."""
    try:
        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
    except OSError:  # a lower cap: the default size works, only slower
        pass


def _owner(pid):
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


KILLS = "kills"  # Zygote.settle: up to the last kill sent
ZYGOTE_DEPTH = 2  # the zygote's PID namespace, counted from ours: bwrap's sandbox, then the zygote's own


class ForkedWorker(_Channel):
    """A worker forked by a :class:`Zygote`, in namespaces of its own inside the zygote's sandbox.

    ``inner`` is the zygote's pid for the worker (the zygote's word, which no worker can touch); the judge maps it
    to a host pid through ``NSpid`` below the zygote sandbox's first process (the zygote's PID namespace is the
    second inside ours: bwrap's, then its own)."""

    def __init__(self, zygote, ident, to_worker, from_worker, output, inner=None):
        super().__init__(to_worker, from_worker, output)
        self.zygote, self.ident, self.hello = zygote, ident, zygote.hello
        self.inner, self.root = inner, None
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
        if self.root is None and isinstance(self.inner, int) and self.zygote.sandboxed.first_pid is not None:
            self.root = clocks.host_pid(self.zygote.sandboxed.first_pid, self.inner, ZYGOTE_DEPTH)
        return self.root

    def _main_pid(self):
        return self._root()  # None until forked: its CPU so far is nil

    def _pids(self):
        root = self._root()
        return clocks.tree(root) if root is not None else []

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
        return _describe_exit(-status["signal"] if "signal" in status else status["code"])

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
            self.sandboxed = _Sandboxed(sandbox, lambda info: sandboxes.zygote_command(
                sandbox, theirs, scratch_dir, info_fd=info, extra_env=extra_env), theirs)
        finally:
            for _, their in pairs:
                their.close()
        self.process = self.sandboxed.process
        self.log = _CappedOutput(self.process.stdout, 8192)
        self.hello = None
        self.count = 0
        self.preloaded = False
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
        _widen(from_worker)
        output_r, output_w = os.pipe()
        try:
            socket.send_fds(self.control, [json.dumps({"op": "spawn", "id": ident,
                                                       "limits": asdict(limits)}).encode()],
                            [to_worker_r, from_worker_w, output_w])
        except OSError:
            for fd in (to_worker, from_worker, output_r):
                os.close(fd)
            raise
        finally:
            for fd in (to_worker_r, from_worker_w, output_w):
                os.close(fd)
        output = _CappedOutput(os.fdopen(output_r, "rb"), limits.output_bytes)
        names = sorted(files)
        worker = ForkedWorker(self, ident, to_worker, from_worker, output)
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

    def kill_later(self, ident):
        """Ask the zygote to kill worker ``ident`` without waiting for its answer (see :meth:`settle`)."""
        try:
            self.control.send(json.dumps({"op": "kill", "id": ident, "wait": 5.0}).encode())
        except OSError:
            self.retired = True
            return
        self.unsettled.append(ident)

    def preload(self):
        """Have the zygote import what notebooks need, once, before it forks notebook workers."""
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
            return self._receive(10).get("status")
        except (OSError, protocol.ProtocolError):
            return None

    def status(self, ident):
        return self._ask({"op": "status", "id": ident, "wait": 2.0})

    def kill(self, ident):
        return self._ask({"op": "kill", "id": ident, "wait": 5.0})

    def close(self):
        self.control.close()
        for lent in self.lent:
            lent.close()
        self.sandboxed.end()
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
        self.unsettled = collections.deque()

    def close(self):
        self.control.close()  # the zygote ends what this judge left behind; the sandbox is not ours to end


class WorkerFactory:
    """Starts the workers of one judge process for one assignment; owns its zygote (if any)."""

    def __init__(self, sandbox, scratch_root, assignment, lend=0, zygote=None):
        """``lend``: start the zygote with control sockets for that many judges forked from this one;
        ``zygote``: a :class:`SharedZygote` to use instead of starting one."""
        self.sandbox, self.scratch_root, self.lend = sandbox, Path(scratch_root), lend
        self.contract = assignment.contract
        # What every worker of this assignment is told: its contract, and the lesson's warm-up for the zygote.
        self.env = {CONTRACT_ENV: self.contract.to_env()}
        if assignment.warm_up is not None:
            self.env[WARM_UP_ENV] = assignment.warm_up.read_text(encoding="utf-8")
        self.zygote, self.note = zygote, ""
        self.use_zygote = sandbox.mode == "bwrap" and sandbox.fork
        self.shares = cpu_share.open_shares()  # None where cgroups v2 offer no CPU controller here
        self.core = None  # the judge's own core, when it has one (core_pairing): its workers join it there
        if sandbox.mode == "uid":  # confined workers, each its own user, pass through to their own folders
            os.chmod(scratch_root, 0o711)

    def start(self):
        """Start the zygote without waiting for it, so its torch import overlaps the judge's own start-up."""
        if self.use_zygote and self.zygote is None:
            self.zygote = Zygote(self.sandbox, self.scratch_root, self.env, lend=self.lend)

    def _live_zygote(self):
        if not self.use_zygote:
            return None
        if self.zygote is not None and self.zygote.retired:
            self.zygote.close()
            self.zygote = None
        alive = self.zygote is not None and self.zygote.process.poll() is None
        if alive and self.zygote.hello is not None:
            return self.zygote
        if not alive:
            if self.zygote is not None:
                self.zygote.close()
            self.zygote = Zygote(self.sandbox, self.scratch_root, self.env)
        try:
            self.zygote.ready(time.monotonic() + self.sandbox.limits.start_seconds * 2)
        except protocol.ProtocolError as error:
            self.note = f"no warm zygote ({error}); one sandbox per worker"
        if not self.zygote.usable:
            self.note = self.note or "no nested namespaces in this sandbox; one sandbox per worker"
            self.zygote.close()
            self.zygote, self.use_zygote = None, False
        return self.zygote

    def share(self, index):
        """A :class:`SharedZygote` over this factory's zygote for the ``index``-th judge forked from this process
        (call in that judge, after the fork), or None where workers are not forked from a zygote here."""
        zygote = self.zygote  # its state as the first judge left it at the fork: this process may not poll it
        if (zygote is None or not (zygote.hello or {}).get("nested") or index >= len(zygote.lent)
                or zygote.sandboxed.pidfd is None):
            return None
        return SharedZygote(self.sandbox, zygote.lent[index], zygote.sandboxed.first_pid, zygote.sandboxed.pidfd)

    @property
    def forks(self):
        """Whether workers are forked from a zygote (rather than each started in a sandbox of its own)."""
        return self._live_zygote() is not None

    def launcher(self, files, scratch):
        """A no-argument callable that starts a fresh worker over the student ``files`` (``{module: bytes}``)."""
        if self.forks:
            return lambda: self._shared(self._spawn(files))
        staged = stage(files, Path(scratch) / "submission", self.contract.modules)
        return lambda: self._shared(WorkerProcess(self.sandbox, staged, scratch, self.env))

    def _shared(self, worker):
        worker.shares, worker.core = self.shares, self.core
        return worker

    def notebook_launcher(self, files, scratch):
        """Like :meth:`launcher`, for a notebook's worker: the zygote imports IPython and matplotlib first (once)."""
        launch = self.launcher(files, scratch)

        def start():
            zygote = self._live_zygote()
            if zygote is not None:
                zygote.preload()
            return launch()

        return start

    def _spawn(self, files):
        zygote = self._live_zygote()
        if zygote is None:
            raise protocol.ChannelClosed(self.note or "the zygote is gone")
        return zygote.spawn(files, self.sandbox.limits)

    def close(self):
        if self.zygote is not None:
            self.zygote.close()
            self.zygote = None
        if self.shares is not None:  # every worker is gone: their groups can go
            self.shares.close()
