"""A plain progress bar on stderr (one line per step when stderr is not a terminal)."""

import sys
import time


class Progress:
    def __init__(self, total, label, stream=None):
        self.total, self.label, self.count = total, label, 0
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.started = time.monotonic()

    def advance(self, detail=""):
        self.count += 1
        width = 30
        filled = width * self.count // max(self.total, 1)
        elapsed = time.monotonic() - self.started
        line = f"{self.label} [{'#' * filled}{'.' * (width - filled)}] {self.count}/{self.total} {elapsed:5.1f}s"
        if self.tty:
            self.stream.write("\r" + f"{line}  {detail}"[:120].ljust(120))
        else:
            self.stream.write(f"{line}  {detail}\n")
        self.stream.flush()

    def close(self):
        if self.tty and self.count:
            self.stream.write("\n")
            self.stream.flush()
