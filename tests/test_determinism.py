"""The grade is a pure function of the submission: the same class gets the same test outcomes graded quietly at
``--jobs 1``, at ``--jobs 2`` beside a CPU-hogging classmate while busy loops (3 per core) load the machine from
outside, and as 2 shards merged. Nothing here measures time: it compares outcomes."""

import os
import subprocess
import sys
from contextlib import contextmanager

import pytest

from autograder.commands.grading import grade_class
from autograder.commands.merge import merge
from autograder.lesson.catalogue import build, copy_package, load_catalogue
from lesson import CATALOGUE, LESSON, MODULES, SOLUTIONS

pytestmark = pytest.mark.slow  # grades a class, builds a venv or runs the demo

# Bugs whose checks once moved with load or chance: the loop-free check (load), the gradient checks (unseeded
# weights), and a spread of the others (each concept family once).
BUGS = ("pe-exponent-uses-pair-index", "mha-values-detached", "mha-no-output-projection",
        "split-view-without-transpose", "sdpa-mask-ignored", "pe-module-plain-attribute")
VARIANTS = ("pe-article-loops", "attention-einsum")
COPIES = 3

# A classmate that keeps many processes busy for as long as its worker lives (its own tests are not compared:
# whether its hog starves its own calls is its business; that it starves no one else is the point).
HOG = '''
import os as _os
for _ in range(6):
    if _os.fork() == 0:
        while True:
            pass
'''


def _class(root):
    class_dir = root / "class"
    for index in range(COPIES):
        copy_package(SOLUTIONS, class_dir / f"copy-{index}", MODULES)
    bugs = {bug.id: bug for bug in load_catalogue(CATALOGUE / "bugs.toml", "bug")}
    variants = {variant.id: variant for variant in load_catalogue(CATALOGUE / "variants.toml", "variant")}
    for name in BUGS:
        build(bugs[name], class_dir / f"bug-{name}", LESSON)
    for name in VARIANTS:
        build(variants[name], class_dir / f"variant-{name}", LESSON)
    hog = copy_package(SOLUTIONS, class_dir / "hog", MODULES)
    path = hog / "heads.py"
    path.write_text(HOG + path.read_text())
    return class_dir


def _outcomes(results):
    """student -> {test id: status}, the hog left out."""
    return {result.student: {test.id or test.name: test.status for test in result.tests}
            for result in results if result.student != "hog"}


@contextmanager
def _busy_loops(per_core=3):
    """Busy loops outside the grader, 3 per core: a course server at a deadline."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(per_core * os.cpu_count())]
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
        for loop in loops:
            loop.wait()


@pytest.fixture(scope="module")
def three_ways(tmp_path_factory):
    root = tmp_path_factory.mktemp("determinism")
    class_dir = _class(root)
    quiet = grade_class(class_dir, root / "quiet", jobs=1, skip_notebook=True, emit=lambda line: None)
    with _busy_loops():
        busy = grade_class(class_dir, root / "busy", jobs=2, skip_notebook=True, emit=lambda line: None)
    shards = [root / f"shard-{index}" for index in (1, 2)]
    for index, folder in enumerate(shards, 1):
        grade_class(class_dir, folder, jobs=1, shard=(index, 2), skip_notebook=True, emit=lambda line: None)
    merged = merge(shards, root / "merged", emit=lambda line: None)
    return quiet, busy, merged


def test_every_student_has_the_same_outcomes_three_ways(three_ways):
    quiet, busy, merged = (_outcomes(results) for results in three_ways)
    assert set(quiet) == set(busy) == set(merged)
    for student in quiet:
        assert busy[student] == quiet[student], f"{student}: graded under load beside a hog differs"
        assert merged[student] == quiet[student], f"{student}: graded as shards differs"


def test_correct_copies_keep_full_marks_in_every_run(three_ways):
    for results in three_ways:
        for result in results:
            if result.student.startswith("copy-") or result.student == "variant-attention-einsum":
                assert result.score == result.max_score > 0, (result.student, result.score, result.max_score)


def test_the_loop_variant_loses_exactly_the_loop_free_check_each_time(three_ways):
    # The check that once moved with load: a Python loop over positions loses it in every run, and nothing else.
    for results in three_ways:
        result = next(result for result in results if result.student == "variant-pe-article-loops")
        failed = {test.id for test in result.tests if test.status == "failed"}
        assert failed == {"test_table_is_vectorized"}, failed
