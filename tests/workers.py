"""Real workers for tests that call a submission directly (no judge): one factory per test module."""

import contextlib
import tempfile
from pathlib import Path

from autograder.sandbox.launch import WorkerFactory
from autograder.judge.remote import RemoteSubmission
from autograder.sandbox.isolation import Limits, choose_sandbox
from autograder.intake.submission import read_files
from lesson import CONTRACT, LESSON


@contextlib.contextmanager
def worker_factory(prefix, call_seconds=None):
    """``(factory, scratch)``: a WorkerFactory (a warm zygote where there is one) over the strongest sandbox this
    machine offers, in a scratch folder of its own; ``call_seconds``: the CPU limit per call, else the default."""
    limits = Limits() if call_seconds is None else Limits(call_seconds=call_seconds)
    with tempfile.TemporaryDirectory(prefix=prefix) as scratch:
        made = WorkerFactory(choose_sandbox("auto", limits=limits), scratch, LESSON)
        try:
            yield made, Path(scratch)
        finally:
            made.close()


def remote_over(factory, folder):
    """A RemoteSubmission over the student files in ``folder``, started by ``factory`` (a ``(factory, scratch)``
    pair from :func:`worker_factory`)."""
    made, scratch = factory
    files, _ = read_files(folder, CONTRACT)
    return RemoteSubmission(made.sandbox, made.launcher(files, scratch), CONTRACT, files=files)


def run_in_bwrap(source):
    """Run Python ``source`` in a bwrap sandbox as a worker's (the same mounts, user and environment); its
    completed process. Skips the test where bwrap does not work here."""
    import subprocess
    import sys

    import pytest

    from autograder.errors import KitError
    from autograder.sandbox import isolation as sandboxes

    try:
        chosen = sandboxes.choose_sandbox("bwrap")
    except KitError as error:
        pytest.skip(f"no bwrap sandbox here: {error}")
    argv = sandboxes._bwrap(chosen, [], [sys.executable, "-c", source])
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
