"""Fixtures of the hidden tests.

``student`` is the submission being graded (a :class:`~autograder.remote.RemoteSubmission`);
the judge's plugin provides it. Run by hand, ``--submission DIR`` grades one
folder (in the sandbox that ``--sandbox`` selects).
"""

import pytest

from autograder.reference import load_reference


def pytest_addoption(parser):
    group = parser.getgroup("mha_pe grading")
    group.addoption("--submission", help="folder with a student's positional_encoding.py, heads.py, attention.py")
    group.addoption("--sandbox", default="auto", help="auto, bwrap or none")


@pytest.fixture(scope="session")
def reference():
    """The trusted reference package (solutions/)."""
    return load_reference()


@pytest.fixture(scope="session")
def student(request):
    """The judge's submission, or (run by hand) the folder given with ``--submission``."""
    judge = request.config.pluginmanager.get_plugin("mha_pe_judge")
    if judge is not None:
        yield judge.submission
        return
    from autograder.judge import open_submission

    folder = request.config.getoption("--submission")
    if not folder:
        pytest.fail("run the hidden tests through 'python -m autograder grade', or pass --submission DIR")
    with open_submission(folder, request.config.getoption("--sandbox")) as submission:
        yield submission
