"""A plain progress bar on stderr (one line per step when stderr is not a terminal)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from ..records.triage import printable


class Progress:
    def __init__(self, total: int, label: str, stream: TextIO | None = None) -> None:
        self.total, self.label, self.count = total, printable(label), 0
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.started = time.monotonic()

    def advance(self, detail: str = "") -> None:
        """One more step done. ``detail`` may hold a student's id: every control character in it is shown as its
        escape (``\\x1b``, ``\\r``), so it can neither retitle the terminal nor erase or move the bar's line."""
        self.count += 1
        width = 30
        filled = width * self.count // max(self.total, 1)
        elapsed = time.monotonic() - self.started
        line = f"{self.label} [{'#' * filled}{'.' * (width - filled)}] {self.count}/{self.total} {elapsed:5.1f}s"
        detail = printable(detail)
        if self.tty:
            self.stream.write("\r" + f"{line}  {detail}"[:120].ljust(120))
        else:
            self.stream.write(f"{line}  {detail}\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty and self.count:
            self.stream.write("\n")
            self.stream.flush()
