"""Every worker of a run starts in the same state, whatever its classmates handed in: what the notebook stage
needs (IPython, matplotlib) is loaded before the zygote's first fork when the run grades notebooks (its
configuration's word), and never otherwise; a worker started alone (``--no-fork``) starts the same way."""

import shutil

import pytest

from autograder.commands.grading import grade_class
from autograder.errors import KitError
from autograder.lesson.catalogue import copy_package
from autograder.sandbox.isolation import choose_sandbox
from lesson import LESSON, MODULES, NOTEBOOK, SOLUTIONS

pytestmark = pytest.mark.slow  # grades a class, builds a venv or runs the demo

# The reference, except that its attention raises where IPython is loaded: an outcome that depends on the
# worker's start state only.
WATCHER = '''

import sys as _sys

if "IPython" in _sys.modules:
    def scaled_dot_product_attention(*args, **kwargs):
        raise RuntimeError("IPython is loaded in this worker")
'''


def _class(root, with_classmate):
    """``zed`` (the watcher, no notebook) alone, or after ``amy`` (the reference with its notebook)."""
    class_dir = root / "class"
    if with_classmate:
        folder = copy_package(SOLUTIONS, class_dir / "amy", MODULES)
        shutil.copyfile(LESSON.source_notebook(), folder / NOTEBOOK)
    folder = copy_package(SOLUTIONS, class_dir / "zed", MODULES)
    attention = folder / "attention.py"
    attention.write_text(attention.read_text() + WATCHER)
    return class_dir


def _outcomes(root, with_classmate, fork=True, skip_notebook=False):
    class_dir = _class(root, with_classmate)
    results = grade_class(class_dir, root / "out", sandbox_mode="bwrap", fork=fork, emit=lambda line: None,
                          skip_notebook=skip_notebook)
    zed = next(result for result in results if result.student == "zed")
    return {(test.group, test.id or test.name): test.status for test in zed.tests}


def _attention_statuses(outcomes):
    return {status for (group, name), status in outcomes.items() if "attention" in name and group != "notebook"}


@pytest.fixture(scope="module")
def forking():
    try:
        sandbox = choose_sandbox("bwrap")
    except KitError as error:
        pytest.skip(f"needs bubblewrap: {error}")
    if not sandbox.fork:
        pytest.skip("needs workers forked from a zygote")
    return sandbox


def test_a_submission_scores_the_same_alone_and_after_a_classmates_notebook(tmp_path, forking):
    alone = _outcomes(tmp_path / "alone", with_classmate=False)
    after = _outcomes(tmp_path / "after", with_classmate=True)
    assert alone == after
    # The run grades notebooks, so every worker started with IPython loaded: the watcher's attention raises.
    assert "failed" in _attention_statuses(alone)


def test_a_run_that_grades_no_notebook_loads_none_of_it(tmp_path, forking):
    outcomes = _outcomes(tmp_path / "code-only", with_classmate=True, skip_notebook=True)
    assert _attention_statuses(outcomes) == {"passed"}
    assert all(group != "notebook" for group, _ in outcomes)


def test_a_worker_started_alone_starts_as_a_forked_one(tmp_path, forking):
    forked = _outcomes(tmp_path / "forked", with_classmate=True)
    alone = _outcomes(tmp_path / "no-fork", with_classmate=True, fork=False)
    assert forked == alone
