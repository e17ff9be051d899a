"""A zygote started before the run has chosen its sandbox, so that its torch import (most of a run's start-up)
overlaps the sandbox check, the planning and the judge's own start-up instead of following them.

It is started in the sandbox the check picks if bubblewrap works (:func:`~.isolation.bwrap_candidate`) and runs
the kit's code only: no student file reaches a zygote before a worker is forked for it, after the check. A judge
takes it only when the check picked exactly that sandbox; otherwise it is ended unused, and nothing else changes.
"""

from __future__ import annotations

import tempfile

from .isolation import Limits, Sandbox, bwrap_candidate
from .launch import worker_env
from .zygote_client import Zygote


class HeadStart:
    """A zygote started ahead for ``sandbox``, with control sockets for ``lend`` judges forked from the one that
    takes it. Ended by :meth:`close` unless a judge took it."""

    def __init__(self, sandbox: Sandbox | None = None, zygote: Zygote | None = None, lend: int = 0) -> None:
        self.sandbox, self.zygote, self.lend = sandbox, zygote, lend

    @classmethod
    def start(cls, mode: str, limits: Limits | None, fork: bool, assignment, lend: int = 0,
              notebook: bool = False) -> "HeadStart":
        """Start the zygote where the run could fork its workers from one (bwrap, ``fork``); an empty head start
        elsewhere, or where it cannot start (the run then starts its own, as it would have). ``notebook``: the run
        grades notebooks (the zygote then loads what they need before its first fork, as the run's own would)."""
        sandbox = bwrap_candidate(mode, limits, fork=fork) if fork else None
        if sandbox is None:
            return cls()
        try:
            # Its working folder outside the sandbox only: nothing is written there.
            return cls(sandbox, Zygote(sandbox, tempfile.gettempdir(), worker_env(assignment, notebook), lend=lend),
                       lend)
        except OSError:
            return cls()

    def keep_for(self, sandbox: Sandbox) -> None:
        """The check picked ``sandbox``: end the zygote now if it was started in another (it would only take a
        core from the run)."""
        if sandbox != self.sandbox:
            self.close()

    def take(self, sandbox: Sandbox, lend: int = 0) -> Zygote | None:
        """The zygote, for a judge grading in ``sandbox`` that lends it to at most ``lend`` forked judges (the
        caller owns it from now); None where there is none, or it was started for another sandbox or fewer
        judges (then it is ended here)."""
        zygote, self.zygote = self.zygote, None
        if zygote is not None and sandbox == self.sandbox and lend <= self.lend:
            return zygote
        if zygote is not None:
            zygote.close()
        return None

    def close(self) -> None:
        """End the zygote if no judge took it."""
        if self.zygote is not None:
            self.zygote.close()
            self.zygote = None

    def __enter__(self) -> "HeadStart":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
