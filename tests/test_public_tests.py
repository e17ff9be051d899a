"""The released public tests: all pass on the reference and on every correct variant, all fail cleanly on the
stubs, and every catalogued bug they can see fails one in its own file with a message naming its concept."""

import ast
import shutil
from pathlib import Path

import pytest

from autograder.judge.hidden_suite import collect_rubric
from autograder.lesson.catalogue import build, load_catalogue
from autograder.lesson.public_tests import run_public_tests_many

from lesson import CATALOGUE, LESSON, RELEASE, SOLUTIONS

BUGS = load_catalogue(CATALOGUE / "bugs.toml", "bug")
VARIANTS = load_catalogue(CATALOGUE / "variants.toml", "variant")


@pytest.fixture(scope="module")
def public_runs(tmp_path_factory):
    """``{name: PublicRun}`` for the reference, the stubs, every bug and every variant: one child process."""
    root = tmp_path_factory.mktemp("public")
    folders = {"reference": SOLUTIONS.parent, "stubs": RELEASE.parent}
    for mutant in BUGS + VARIANTS:
        package = build(mutant, root / mutant.id / LESSON.id, LESSON)
        shutil.copyfile(SOLUTIONS / "__init__.py", package / "__init__.py")
        folders[mutant.id] = root / mutant.id
    runs = run_public_tests_many(folders.values(), LESSON)
    return {name: runs[str(Path(folder).resolve())] for name, folder in folders.items()}


@pytest.fixture(scope="module")
def on_reference(public_runs):
    return public_runs["reference"]


@pytest.fixture(scope="module")
def on_stubs(public_runs):
    return public_runs["stubs"]


@pytest.mark.slow  # the catalogue's public-test runs: one child process over every bug
def test_there_are_at_least_15_public_tests(on_reference):
    assert len(on_reference.outcomes) >= 15


@pytest.mark.slow  # the catalogue's public-test runs: one child process over every bug
def test_every_public_test_passes_on_the_reference(on_reference):
    assert on_reference.exit_code == 0
    assert set(on_reference.outcomes.values()) == {"passed"}, on_reference.outcomes


@pytest.mark.slow  # the catalogue's public-test runs: one child process over every bug
def test_every_public_test_fails_cleanly_on_the_stubs(on_stubs, on_reference):
    assert set(on_stubs.outcomes.values()) == {"failed"}, "each test must fail, none may error at collection or set-up"
    assert on_stubs.outcomes.keys() == on_reference.outcomes.keys(), "the same tests are collected either way"


def test_public_tests_cover_every_part_of_the_contract():
    names = ["get_positional_encoding", "shift_matrix", "PositionalEncoding", "split_heads", "combine_heads",
             "scaled_dot_product_attention", "MultiHeadAttention"]
    used = set()
    for path in (RELEASE / "tests").glob("test_*.py"):
        used |= {node.id for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Name)}
    assert not set(names) - used


def test_every_assert_in_the_public_tests_explains_itself():
    """A bare ``assert x == y`` teaches nothing; each assert carries a message."""
    for path in (RELEASE / "tests").glob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assert):
                assert node.msg is not None, f"{path.name}:{node.lineno}: assert without a teaching message"


@pytest.mark.slow  # the catalogue's public-test runs: one child process over every bug
@pytest.mark.parametrize("bug", [bug for bug in BUGS if not bug.not_public], ids=lambda bug: bug.id)
def test_each_bug_fails_a_public_test_in_its_own_file_that_names_its_concept(public_runs, bug):
    """A student running the public tests is sent to the right file and the right idea."""
    run = public_runs[bug.id]
    own = {f"test_{file.removesuffix('.py')}::" for file in bug.files}  # junit ids: test_heads::test_...
    failed = {test: run.messages.get(test, "") for test, outcome in run.outcomes.items() if outcome != "passed"}
    assert failed, "no public test fails"
    named = [test for test, message in failed.items()
             if test.startswith(tuple(own)) and bug.concept.lower() in message.lower()]
    assert named, f"no failure in {sorted(own)} names {bug.concept!r}: {failed}"


@pytest.mark.slow  # the catalogue's public-test runs: one child process over every bug
@pytest.mark.parametrize("variant", VARIANTS, ids=lambda variant: variant.id)
def test_correct_variants_pass_every_public_test(public_runs, variant):
    run = public_runs[variant.id]
    assert run.outcomes and set(run.outcomes.values()) == {"passed"}, run.messages


@pytest.mark.slow  # the catalogue's public-test runs: one child process over every bug
def test_the_module_mask_test_blames_the_mask_only_for_mask_bugs(public_runs):
    """The attention module's public mask test used to fail, with a mask message, for any bug in the module."""
    test = "test_attention::test_module_mask_reaches_every_head"
    blamed = {bug.id for bug in BUGS if "mask" in public_runs[bug.id].messages.get(test, "")}
    assert blamed and all(bug.startswith(("sdpa-mask", "mha-mask")) for bug in blamed), blamed


def test_few_bugs_are_out_of_the_public_tests_reach_and_each_says_why():
    """Out of their reach by design: a forbidden API giving correct results (only the grader's scan and tripwires
    see it), speed (a timed public test would pass or fail with the machine) and a rule only checks the instructor
    marked hidden look at (a public test would show it); any other bug they miss is a gap in them, and there is
    one at most."""
    hidden = [bug for bug in BUGS if bug.not_public]
    assert all(len(bug.not_public) > 20 for bug in hidden)
    unseen = {entry.id for entry in collect_rubric(LESSON.hidden_tests) if entry.visibility == "hidden"}
    gaps = [bug.id for bug in hidden
            if not {"forbidden", "pe-vectorized"} & set(bug.topics) and not set(bug.catches) <= unseen]
    assert len(gaps) <= 1, gaps
