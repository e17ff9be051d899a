"""How a judge starts workers: one sandbox per worker, or forks of a warm zygote inside one sandbox.

:class:`WorkerFactory` picks the fast path when it can: a :class:`Zygote`
(torch imported and warmed up once) forks each worker into namespaces of its
own (bwrap), or confined to a user of its own (``--sandbox uid``, no namespaces).
Where the kernel does not allow that, or with ``--no-fork``, every worker is a
:class:`WorkerProcess` in a sandbox of its own, started ahead of time so its
start-up overlaps the previous student's tests.
"""


import os
import time
from pathlib import Path

from . import cpu_share
from ..intake.stubs import stub_files
from ..intake.submission import stage
from ..worker import protocol
from ..worker.contract import ENV as CONTRACT_ENV
from ..worker.main import WARM_UP_ENV
from ..worker.preload import PRELOAD_ENV
from .worker_process import WorkerProcess
from .zygote_client import SharedZygote, Zygote


def worker_env(assignment, notebook=False):
    """What every worker of ``assignment`` is told: its contract, the lesson's warm-up for the zygote, and whether
    the run grades notebooks (``notebook``: then every worker starts with what a notebook needs loaded)."""
    env = {CONTRACT_ENV: assignment.contract.to_env()}
    if assignment.warm_up is not None:
        env[WARM_UP_ENV] = assignment.warm_up.read_text(encoding="utf-8")
    if notebook:
        env[PRELOAD_ENV] = "1"
    return env


class WorkerFactory:
    """Starts the workers of one judge process for one assignment; owns its zygote (if any)."""

    def __init__(self, sandbox, scratch_root, assignment, lend=0, zygote=None, notebook=False):
        """``lend``: start the zygote with control sockets for that many judges forked from this one;
        ``zygote``: one to use instead of starting one (a :class:`SharedZygote`, or a :class:`Zygote` started
        ahead, :mod:`.head_start`), owned by this factory from now; ``notebook``: the run grades notebooks (its
        configuration's word, never whether a student handed one in), so every worker it starts, forked or not,
        starts with what a notebook needs loaded (:func:`~..worker.preload.preload_notebook`), and none otherwise."""
        self.sandbox, self.scratch_root, self.lend = sandbox, Path(scratch_root), lend
        self.contract = assignment.contract
        self.stubs = stub_files(assignment.release, assignment.contract.modules)  # intake's choice of copy
        self.notebook = notebook
        self.env = worker_env(assignment, notebook)
        self.zygote, self.note = zygote, ""
        # bwrap: forks in namespaces of their own, where the kernel allows nesting; uid: confined forks
        self.use_zygote = sandbox.mode in ("bwrap", "uid") and sandbox.fork
        self.shares = cpu_share.open_shares()  # None where cgroups v2 offer no CPU controller here
        self.core = None  # the judge's own core, when it has one (core_pairing): its workers join it there
        self.spare = frozenset()  # cores no judge holds, where its workers are ended (core_pairing.spare_cores)
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
            self.note = self.note or ("a forked worker could not confine itself; one process per worker"
                                      if self.sandbox.mode == "uid" else
                                      "no nested namespaces in this sandbox; one sandbox per worker")
            self.zygote.close()
            self.zygote, self.use_zygote = None, False
        elif self.notebook:  # a zygote started without the run's word (ahead of it): told before its first fork
            self.zygote.preload()
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
        Path(scratch).mkdir(mode=0o700, exist_ok=True)  # the judge names it; only this path needs it made
        staged = stage(files, Path(scratch) / "submission", self.contract.modules)
        return lambda: self._shared(WorkerProcess(self.sandbox, staged, scratch, self.env))

    def _shared(self, worker):
        worker.shares, worker.core, worker.spare = self.shares, self.core, self.spare
        return worker

    def notebook_launcher(self, files, scratch):
        """Like :meth:`launcher`, for a notebook's worker: it starts as every worker of the run does (what a
        notebook needs was loaded before the first, where the run grades notebooks: ``notebook``)."""
        return self.launcher(files, scratch)

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
