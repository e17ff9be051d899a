"""Fixtures of the hidden tests, for running them by hand with pytest.

The judge does not use this file: it calls the tests with its own ``student``
and ``reference`` (see the engine's hidden suite). By hand,
``--submission DIR`` makes ``student`` a submission (``open_submission``)
over one folder, in the sandbox that ``--sandbox`` selects.
"""

from pathlib import Path

import pytest

from autograder.lesson_api import load, load_reference

ASSIGNMENT = Path(__file__).resolve().parent.parent  # this lesson's folder, with its descriptor


def pytest_addoption(parser):
    group = parser.getgroup("hidden tests")
    group.addoption("--submission", help="folder with a student's positional_encoding.py, heads.py, attention.py")
    group.addoption("--sandbox", default="auto", help="auto, bwrap or none")


@pytest.fixture(scope="session")
def reference():
    """The trusted reference package (solutions/)."""
    return load_reference(load(ASSIGNMENT))


@pytest.fixture(scope="session")
def student(request):
    """The folder given with ``--submission``, behind a sandboxed worker."""
    from autograder.lesson_api import open_submission  # the judge's machinery: loaded only when a check runs

    folder = request.config.getoption("--submission")
    if not folder:
        pytest.fail("run the hidden tests through 'python -m autograder grade', or pass --submission DIR")
    with open_submission(folder, load(ASSIGNMENT), request.config.getoption("--sandbox")) as submission:
        yield submission
