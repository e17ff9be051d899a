"""A worker's pipes, seen from the judge: requests out and replies in (bounded, with a deadline), its prints
captured and capped, its CPU read from ``/proc``, its exit described in words (:class:`Channel`).
"""

import fcntl
import os
import select
import signal
import struct
import termios
import threading
import time

from . import clocks, core_pairing
from ..worker import protocol


class CappedOutput(threading.Thread):
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
        # "replace": a byte that is not UTF-8 (a cut character too) becomes U+FFFD, never a surrogate, so the prints
        # enter the judge as valid text (worker/text.py) without another pass.
        text = self.kept.decode("utf-8", "replace")
        return text + (f"\n[... {self.dropped} more bytes of output not kept]" if self.dropped else "")


class Channel:
    """Request/reply over a worker's two pipes; each request carries a nonce its reply must echo."""

    hello = None

    cpu_start = 0.0  # the main process's CPU before any student code ran (a torch import, say)
    last_cpu = 0.0  # the latest cpu_mark
    shares = None  # the factory's cpu_share.CpuShares, where cgroups v2 give each worker a CPU share
    share = None  # this worker's group there, once placed
    core = None  # its judge's core (core_pairing), where the judge has one of its own
    spare = frozenset()  # cores no judge holds (core_pairing.spare_cores): where it is ended

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
            if self.core is not None and self._stat.cpu() is not None:  # still there: its pid is still its own
                core_pairing.set_aside(self._stat.pid, self.spare)
            self._stat.close()
        for fd in (self._to_worker, self._from_worker):
            try:
                os.close(fd)
            except OSError:
                pass


def describe_exit(code):
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def widen(fd):
    """Let a pipe hold a megabyte (Linux's default cap for any user): a big tensor crosses in a few writes, not
    a hundred 64 KiB ones, each a switch between the worker and the judge."""
    try:
        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
    except OSError:  # a lower cap: the default size works, only slower
        pass


def owner_of(pid):
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None
