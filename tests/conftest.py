"""Fixtures shared by the kit's own tests."""

import atexit
import os
import shutil
import socket
import tempfile
import threading

import pytest

from autograder import paths
from autograder.lesson.reference import load_reference
from lesson import LESSON

# The judge's seal key (autograder/records/seal.py) in a folder of the test run's own, never the machine's: the kit's
# commands the tests start inherit it.
_STATE = tempfile.mkdtemp(prefix="kit-tests-state-")
os.environ["XDG_STATE_HOME"] = _STATE
os.environ.pop("AUTOGRADER_SEAL_KEY", None)
atexit.register(shutil.rmtree, _STATE, True)

# The second assignment's own public tests are not the kit's tests: they run through its release in test_second.
collect_ignore = ["fixtures"]


@pytest.fixture(scope="session")
def reference():
    """The lesson's reference package (solutions/), imported as ``<id>_reference``."""
    return load_reference(LESSON)


@pytest.fixture(scope="session")
def repo():
    return paths.REPO_ROOT


class LoopbackListener(threading.Thread):
    """A TCP server on the grading machine's localhost that counts connections (network attacks must reach none)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.2)
        self.port, self.connections, self.stopped = self.server.getsockname()[1], 0, False
        self.start()

    def run(self):
        while not self.stopped:
            try:
                connection, _ = self.server.accept()
            except OSError:
                continue
            self.connections += 1
            connection.close()
        self.server.close()


@pytest.fixture(scope="module")
def loopback_listener():
    listener = LoopbackListener()
    yield listener
    listener.stopped = True
