"""A worker in a sandbox of its own (:class:`WorkerProcess`): bwrap, or a confined user of its own for ``--sandbox
uid`` (whose processes are ended and files removed when it is done: :func:`end_user`), or nothing for ``none``.
"""

import contextlib
import json
import os
import select
import signal
import subprocess
import time

from . import clocks, confined
from . import isolation as sandboxes
from . import strays
from ..worker import protocol
from ..worker.confine import end_user, processes_of
from .channel import CappedOutput, Channel, describe_exit, widen


class Sandboxed:
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
        # --sandbox uid: every process of this user is the worker's; its folder goes with it
        self.uid, self.folder = confined.confined_user(env)
        # A uid zygote is no sandbox's child: the process started is the first (and its end the end of it all)
        self.own_first = sandbox.mode == "uid" and self.uid is None
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
        if self.own_first and self.pidfd is None:
            with contextlib.suppress(OSError):
                self.pidfd, self.first_pid = os.pidfd_open(self.process.pid), self.process.pid
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
            end_user(self.uid, folder=self.folder)
        if self.unisolated:
            strays.ended(self.process.pid)
            strays.end_strays()
        self._close_info()

    def _close_info(self):
        if self.info is not None:
            os.close(self.info)
            self.info = None


class WorkerProcess(Channel):
    """A worker in a sandbox of its own (one bwrap per worker). ``ready`` waits for its hello."""

    def __init__(self, sandbox, submission_dir, scratch_dir, extra_env=None):
        to_worker_r, to_worker = os.pipe()
        from_worker, from_worker_w = os.pipe()
        widen(from_worker)
        try:
            self.sandboxed = Sandboxed(sandbox, lambda info: sandboxes.worker_command(
                sandbox, submission_dir, to_worker_r, from_worker_w, scratch_dir, info_fd=info, extra_env=extra_env),
                (to_worker_r, from_worker_w))
        finally:
            os.close(to_worker_r)
            os.close(from_worker_w)
        self.process = self.sandboxed.process
        super().__init__(to_worker, from_worker, CappedOutput(self.process.stdout, sandbox.limits.output_bytes))

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
            pids += processes_of(self.sandboxed.uid, [pid for pid in links if pid not in pids])
        return pids

    def exit_detail(self):
        """Why the process ended, in words (waits briefly for it)."""
        try:
            return describe_exit(self.process.wait(timeout=2))
        except subprocess.TimeoutExpired:
            return "it stopped answering"

    def close(self):
        self._close_pipes()
        self.sandboxed.end()
        self.output.join(timeout=5)
