"""One list of packages students may import (the descriptor's ``packages``): the grading environment, the
Classroom template and Gradescope's image install exactly those, and a submission importing anything else is
told so once, by name."""

import tomllib

import pytest

from autograder import paths
from autograder.lesson import pins
from autograder.lesson.assignment import load
from autograder.commands.classroom import student_readme, student_requirements
from autograder.errors import KitError
from autograder.commands.gradescope import setup_script
from autograder.commands.grading import grade_class
from autograder.intake.imports import unavailable_imports
from autograder.lesson.catalogue import build, copy_package, load_catalogue
from autograder.reports.feedback import render
from autograder.sandbox.isolation import Limits
from lesson import CATALOGUE, CONTRACT, LESSON, MODULES, SOLUTIONS

PACKAGES = CONTRACT.packages


@pytest.mark.check
def test_every_allowed_package_is_a_pinned_dependency_of_the_grader():
    dependencies = tomllib.loads((paths.REPO_ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert "einops" in PACKAGES and "torch" in PACKAGES
    for name in PACKAGES:
        assert pins.pin(name) in dependencies, f"{name} is not pinned in pyproject's dependencies"


@pytest.mark.check
def test_the_template_the_image_and_the_readme_take_the_list():
    requirements = student_requirements(LESSON).splitlines()
    assert {pins.pin(name) for name in PACKAGES} <= set(requirements)
    assert f".venv/bin/python -c \"import {', '.join(PACKAGES)}\"" in setup_script(LESSON)
    readme = " ".join(student_readme(LESSON).split())
    assert "you may import `torch`, `numpy` and `einops`: the grader has those" in readme


@pytest.mark.parametrize("value", ['["numpy"]', '"torch"', '["torch", "os"]', '["torch", "1x"]'])
def test_a_bad_package_list_is_one_line(tmp_path, value):
    text = (LESSON.descriptor.read_text().replace('packages = ["torch", "numpy", "einops"]', f"packages = {value}")
            .replace('"../../../', f'"{LESSON.folder}/../../../'))
    (tmp_path / "assignment.toml").write_text(text.replace('hidden_tests = "hidden_tests"',
                                                           f'hidden_tests = "{LESSON.hidden_tests}"'))
    with pytest.raises(KitError) as caught:
        load(tmp_path)
    assert "packages" in str(caught.value) and "\n" not in str(caught.value)


def scan(**sources):
    return unavailable_imports({module: text.encode() for module, text in sources.items()}, CONTRACT)


def test_the_scan_finds_what_the_grader_lacks_and_nothing_else():
    found = scan(attention="import os, math\nimport torch.nn as nn\nfrom einops import rearrange\nimport numpy\n"
                           "from . import heads\nfrom .heads import split_heads\nimport mha_pe.heads\n"
                           "import scipy.special\nfrom foo_not_there.x import y\n"
                           "def f():\n    import sklearn\n",
                 heads="try:\n    import opt_einsum\nexcept ImportError:\n    opt_einsum = None\n",
                 positional_encoding="def broken(:\n    import scipy\n")
    assert found == {"attention": ("scipy", "foo_not_there", "sklearn")}


@pytest.mark.slow
def test_an_import_outside_the_list_gets_one_note_and_clear_failures(tmp_path):
    class_dir = tmp_path / "class"
    for student, line in (("scipy", "import scipy.special"), ("foo", "import foo_not_there")):
        folder = copy_package(SOLUTIONS, class_dir / student, MODULES)
        attention = folder / "attention.py"
        attention.write_text(attention.read_text().replace("import math\n", f"import math\n{line}\n", 1))
    variants = {variant.id: variant for variant in load_catalogue(CATALOGUE / "variants.toml", "variant")}
    build(variants["heads-einops-rearrange"], class_dir / "einops", LESSON)
    results = {result.student: result for result in grade_class(
        class_dir, tmp_path / "out", jobs=1, limits=Limits(call_seconds=8.0), emit=lambda line: None,
        skip_notebook=True)}
    assert results["einops"].score == results["einops"].max_score > 0 and not results["einops"].notices
    for student, module in (("scipy", "scipy"), ("foo", "foo_not_there")):
        result = results[student]
        assert len(result.notices) == 1 and f"`{module}`" in result.notices[0]
        assert "torch, numpy, einops" in result.notices[0]
        assert [note for note in result.notes if module in note] == list(result.notices)
        assert 0 < result.score < result.max_score  # the other files' checks keep their points
        feedback = render(result)
        assert feedback.count(result.notices[0]) == 1
        assert feedback.index(result.notices[0]) < feedback.index("| part | points |")
        assert "ModuleNotFoundError" not in feedback
        failed = [test for test in result.tests if "importing attention.py failed" in test.output]
        assert failed and all(f"it imports `{module}`, which graders do not have (allowed: torch, numpy, einops)"
                              in test.output for test in failed)
