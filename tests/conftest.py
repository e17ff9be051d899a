"""Fixtures shared by the kit's own tests."""

import socket
import threading

import pytest

from autograder import paths
from autograder.reference import load_reference


@pytest.fixture(scope="session")
def reference():
    """The reference ``mha_pe`` package (solutions/), imported as ``mha_pe_reference``."""
    return load_reference()


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
