"""The released public tests: all pass on the reference, all fail cleanly on the stubs."""

import ast

import pytest

from autograder import paths
from autograder.public_tests import run_public_tests


@pytest.fixture(scope="module")
def on_reference():
    return run_public_tests(paths.SOLUTIONS_DIR)


@pytest.fixture(scope="module")
def on_stubs():
    return run_public_tests(paths.ASSIGNMENTS_DIR)


def test_there_are_at_least_15_public_tests(on_reference):
    assert len(on_reference.outcomes) >= 15


def test_every_public_test_passes_on_the_reference(on_reference):
    assert on_reference.exit_code == 0
    assert set(on_reference.outcomes.values()) == {"passed"}, on_reference.outcomes


def test_every_public_test_fails_cleanly_on_the_stubs(on_stubs, on_reference):
    assert set(on_stubs.outcomes.values()) == {"failed"}, "each test must fail, none may error at collection or set-up"
    assert on_stubs.outcomes.keys() == on_reference.outcomes.keys(), "the same tests are collected either way"


def test_public_tests_cover_every_part_of_the_contract():
    names = ["get_positional_encoding", "shift_matrix", "PositionalEncoding", "split_heads", "combine_heads",
             "scaled_dot_product_attention", "MultiHeadAttention"]
    used = set()
    for path in (paths.ASSIGNMENTS_DIR / "mha_pe" / "tests").glob("test_*.py"):
        used |= {node.id for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Name)}
    assert not set(names) - used


def test_every_assert_in_the_public_tests_explains_itself():
    """A bare ``assert x == y`` teaches nothing; each assert carries a message."""
    for path in (paths.ASSIGNMENTS_DIR / "mha_pe" / "tests").glob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assert):
                assert node.msg is not None, f"{path.name}:{node.lineno}: assert without a teaching message"
