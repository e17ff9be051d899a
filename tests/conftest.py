"""Fixtures shared by the kit's own tests."""

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
