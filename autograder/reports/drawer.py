"""A process of its own that draws a run's charts, warmed up while the run starts.

Drawing the charts needs Pillow, numpy and their fonts loaded. A :class:`Drawer` is forked at the start of the
run (before torch is imported: a small process), pays that cost at once, beside the start-up (on a core that
would only wait for the zygote), then waits. At the end, each chart it is sent (by the name of a function of
:mod:`.figures` and its arguments, as JSON) is drawn in a child of its own (:func:`.figures.draw_aside`), beside
the reports the run writes meanwhile. A chart the drawer could not draw (it is gone, it failed, it was never
started) is drawn in the caller's process: the figures are there either way.

Both sides are the instructor's: nothing a submission wrote reaches the drawer but the records' numbers and names.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import time
from pathlib import Path

from ..sandbox import strays
from ..worker import linux
from . import figures

DRAWINGS = ("pass_rate_chart", "score_histogram")  # what a drawer may be asked to draw
REPLY_LIMIT = 1 << 16  # the drawer's replies: one short line per chart
# The charts take a fraction of a second; a drawer (or a drawing child) that hangs is ended after this, and the run draws
# them itself.
DRAW_SECONDS = 120.0


class Drawer:
    """The run's end of a drawing process: :meth:`draw` sends charts, :meth:`finish` waits for them."""

    def __init__(self, pid: int | None, to_drawer: int | None, from_drawer: int | None) -> None:
        self._pid, self._to, self._from = pid, to_drawer, from_drawer
        self._sent: list[figures.Drawing] = []
        self._pidfd = None
        if pid is not None:
            # Named by a descriptor, never by its pid again: a pid reaped elsewhere may be another process's.
            self._pidfd = os.pidfd_open(pid)
            strays.started(pid)  # --sandbox none: the judge's own child, not a stray of a worker's

    @classmethod
    def start(cls) -> Drawer:
        """Fork the drawing process (none where fork fails: every chart is then drawn by the caller)."""
        requests_r, requests_w = os.pipe()
        replies_r, replies_w = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            for fd in (requests_r, requests_w, replies_r, replies_w):
                os.close(fd)
            return cls(None, None, None)
        if pid == 0:  # the drawer: leave without running any of the parent's exit handlers
            code = 1
            try:
                code = _serve(requests_r, replies_w)
            finally:
                os._exit(code)
        os.close(requests_r)
        os.close(replies_w)
        return cls(pid, requests_w, replies_r)

    def draw(self, drawing: figures.Drawing) -> None:
        """Ask for ``drawing`` (a function named in :data:`DRAWINGS`, with arguments JSON can carry)."""
        self._sent.append(drawing)
        self._send({"function": drawing.function.__name__, "path": str(drawing.path), "args": list(drawing.args),
                    "kwargs": drawing.kwargs})

    def _send(self, request: dict) -> None:
        if self._to is None:
            return
        try:
            os.write(self._to, (json.dumps(request) + "\n").encode())  # short lines, sent before any reply is read
        except OSError:
            self.close()

    def finish(self) -> list[Path]:
        """Wait for every chart sent; return their paths in the order they were sent (a chart the drawer did not
        draw is drawn here now)."""
        drawn = []
        if self._to is not None:
            os.close(self._to)
            self._to = None
            with contextlib.suppress(OSError, ValueError, TimeoutError):
                drawn = [reply.get("path") for reply in map(json.loads, _read_all(self._from).splitlines())]
        self.close()
        sent, self._sent = self._sent, []
        paths = []
        for index, drawing in enumerate(sent):
            done = index < len(drawn) and drawn[index] == str(drawing.path) and drawing.path.is_file()
            paths.append(drawing.path if done else drawing())
        return paths

    def close(self) -> None:
        """End the drawer (at once: whatever it was still drawing is drawn by the caller) and reap it."""
        for fd in (self._to, self._from):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._to = self._from = None
        if self._pidfd is not None:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitid(os.P_PIDFD, self._pidfd, os.WEXITED)
            os.close(self._pidfd)
            strays.ended(self._pid)
        self._pid = self._pidfd = None


def _read_all(fd: int) -> str:
    """What the drawer replied, once it closes its end (within :data:`DRAW_SECONDS`, else TimeoutError)."""
    data, deadline = b"", time.monotonic() + DRAW_SECONDS
    while len(data) < REPLY_LIMIT:
        if not select.select([fd], [], [], max(deadline - time.monotonic(), 0.0))[0]:
            raise TimeoutError("the drawer did not reply in time")
        chunk = os.read(fd, REPLY_LIMIT - len(data))
        if not chunk:
            break
        data += chunk
    return data.decode()


def _serve(requests: int, replies: int) -> int:
    """In the drawer: keep only its pipes, warm up, then draw each chart asked for, each in a child; at the end
    of the requests, reply with each one's path (or an error) in order."""
    parent = os.getppid()
    linux.prctl(linux.PR_SET_PDEATHSIG, signal.SIGKILL)  # with the run gone, nobody would wait for its charts
    if os.getppid() != parent:
        return 1
    for fd in map(int, os.listdir("/proc/self/fd")):
        if fd not in (0, 1, 2, requests, replies):
            with contextlib.suppress(OSError):
                os.close(fd)
    with contextlib.suppress(Exception):  # a head start only: each drawing imports what it needs
        figures.warm()
    pending = []
    with open(requests, encoding="utf-8") as lines:
        for line in lines:
            try:
                request = json.loads(line)
            except ValueError as error:
                pending.append(error)
                continue
            try:
                if request["function"] not in DRAWINGS:
                    raise ValueError(request["function"])
                drawing = figures.Drawing(getattr(figures, request["function"]), request["path"],
                                          *request["args"], **request["kwargs"])
                pending.append(figures.draw_aside(drawing))
            except Exception as error:  # noqa: BLE001 - that chart is drawn by the run itself
                pending.append(error)
    with open(replies, "w", encoding="utf-8") as out:
        for finish in pending:
            try:
                reply = {"error": type(finish).__name__} if isinstance(finish, Exception) else {
                    "path": str(finish())}
            except Exception as error:  # noqa: BLE001 - as above
                reply = {"error": type(error).__name__}
            out.write(json.dumps(reply) + "\n")
    return 0
