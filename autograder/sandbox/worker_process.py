"""A worker in a sandbox of its own (:class:`WorkerProcess`): bwrap, or a confined user of its own for ``--sandbox
uid`` (whose processes are ended and files removed when it is done: :func:`end_user`), or nothing for ``none``.
"""

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import time

from . import clocks
from . import isolation as sandboxes
from . import strays
from ..worker import protocol
from .channel import CappedOutput, Channel, describe_exit, owner_of, widen


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
            pids += [pid for pid in links if pid not in pids and owner_of(pid) == self.sandboxed.uid]
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
