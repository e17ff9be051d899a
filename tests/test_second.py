"""The seam between engine and lesson: a second, tiny assignment (``tests/fixtures/vector_norms``) goes through
release, grading, validation and every report with nothing but its descriptor."""

import csv
import re
import shutil
from pathlib import Path

import pytest

from autograder.lesson import assignment as assignments
from autograder.commands.classroom import _forbidden as classroom_forbidden
from autograder.commands.classroom import classroom_steps, student_readme, write_template
from autograder.commands.grading import grade_class
from autograder.judge.hidden_suite import collect_rubric
from autograder.lesson.catalogue import build, copy_package, load_catalogue
from autograder.lesson.public_tests import run_public_tests
from autograder.commands.release import release, solution_lines
from autograder.reports.rubric_page import render_rubric
from autograder.commands.validate import validate

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "vector_norms"


@pytest.fixture(scope="module")
def lesson(tmp_path_factory):
    """The fixture copied to a folder of its own and released there (its release is generated, never committed)."""
    root = tmp_path_factory.mktemp("second") / "vector_norms"
    shutil.copytree(FIXTURE, root)
    lesson = assignments.load(root)
    ok, _ = release(lesson)
    assert ok
    return lesson


@pytest.fixture(scope="module")
def graded(lesson, tmp_path_factory):
    """The reference, the stubs, every catalogued bug and variant, graded by one ``grade`` run."""
    root = tmp_path_factory.mktemp("second-class")
    class_dir, out = root / "class", root / "out"
    modules = lesson.contract.modules
    copy_package(lesson.solutions, class_dir / "reference", modules)
    copy_package(lesson.release, class_dir / "stubs", modules)
    for kind, file in (("bug", "bugs.toml"), ("variant", "variants.toml")):
        for mutant in load_catalogue(lesson.catalogue / file, kind):
            build(mutant, class_dir / mutant.id, lesson)
    results = {result.student: result for result in grade_class(class_dir, out, emit=SAID.append,
                                                                  assignment=lesson)}
    return results, out


SAID = []  # what the graded fixture's grade run printed


def test_the_descriptor_is_all_the_engine_knows(lesson):
    assert lesson.id == "vector_norms" and lesson.notebook is None
    assert lesson.contract.modules == ("norms", "layers")
    assert lesson.contract.names == {"l2_norm": "norms", "normalize": "norms", "UnitNorm": "layers"}
    assert lesson.contract.forbidden_by_name["normalize"] == "torch.nn.functional.normalize"


def test_the_release_is_generated_from_its_solutions_and_leaks_nothing(lesson):
    assert release(lesson, check=True)[0]
    for name in lesson.student_files:
        source, released = (lesson.solutions / name).read_text(), (lesson.release / name).read_text()
        assert "NotImplementedError" in released
        assert not set(solution_lines(source, name)) & {line.strip() for line in released.splitlines()}
    runs = {folder: run_public_tests(folder, lesson) for folder in (lesson.solutions.parent, lesson.release.parent)}
    on_reference, on_stubs = runs[lesson.solutions.parent], runs[lesson.release.parent]
    assert on_reference.exit_code == 0 and len(on_reference.outcomes) == 3
    assert set(on_stubs.outcomes.values()) == {"failed"}


def _maximum(lesson):
    """The fixture's code maximum, from its own rubric."""
    return sum(entry.points for entry in collect_rubric(lesson.hidden_tests))


@pytest.mark.slow
def test_its_class_is_graded_with_its_own_rubric(lesson, graded):
    results, out = graded
    maximum = _maximum(lesson)
    assert maximum > 0 and len(collect_rubric(lesson.hidden_tests)) == 4
    reference, stubs = results["reference"], results["stubs"]
    assert reference.score == reference.max_score == maximum
    assert stubs.score == 0 and stubs.max_score == maximum
    assert results["norm-as-matmul"].score == maximum, "a correct variant keeps every point"
    forbidden = results["uses-torch-normalize"]
    assert forbidden.score < maximum
    assert any("torch.nn.functional.normalize" in test.output for test in forbidden.tests if test.status == "failed")
    assert {test.group for test in reference.tests} == {"norms"}


@pytest.mark.slow
def test_the_run_ends_with_its_time_per_student_and_the_load_it_saw(graded):
    """Timings on a shared machine mean little without the load they ran under: the summary states both (then
    whom to look at, triage's lines)."""
    results, _ = graded
    last = next(line for line in reversed(SAID) if line.startswith("graded "))
    after = SAID[SAID.index(last) + 1:]
    assert after and after[0].startswith("needs a look"), after  # then the students, one line each
    assert last.startswith(f"graded {len(results)} submission(s) in "), last
    assert re.search(r": \d+\.\d\d students a second at --jobs 1 \(\d+\.\d\d s a student\); "
                     r"\d+\.\d of \d+ cores busy; "
                     r"load average \d+\.\d at the start, \d+\.\d at the end; sandbox: \w+; results in ", last), last


@pytest.mark.slow
def test_its_reports_are_written(lesson, graded):
    results, out = graded
    with open(out / "gradebook.csv", newline="") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    assert set(rows) == set(results) and rows["reference"]["score"] == f"{_maximum(lesson):g}"
    assert "notebook" not in next(iter(rows.values())), "no notebook, no notebook columns"
    feedback = (out / "feedback" / "normalize-divides-by-zero.md").read_text()
    assert "zero vector" in feedback.lower()
    assert "test_zero_vector_stays_zero" not in feedback, "a hidden check shows its concept, never its code"
    assert (out / "report.md").is_file() and (out / "figures" / "pass_rate.png").is_file()
    assert not (out / "nbgrader").exists()


@pytest.mark.slow
def test_validate_proves_its_grader(lesson):
    lines = []
    assert validate(jobs=2, emit=lines.append, assignment=lesson)
    text = "\n".join(lines)
    assert "mutation score: 3/3 bugs caught" in text
    assert "correct variants keeping their points: 1/1" in text


def test_its_rubric_page_and_classroom_template(lesson, tmp_path):
    page = render_rubric(lesson)
    assert f"Total: {_maximum(lesson):g}" in page and "normalize keeps a zero vector at zero" in page
    assert "## Promises the docstrings make" in page and "`test_zero_vector_stays_zero` |" in page, (
        "its own promises file, through the same table (tests/test_promises.py checks it against its docstrings)")
    steps = classroom_steps(lesson)
    assert [step.test_file for step in steps] == ["test_norms.py", "test_norms.py", "test_layers.py"]
    files = write_template(tmp_path / "template", lesson)
    assert "assignments/vector_norms/norms.py" in files
    readme = (tmp_path / "template" / "README.md").read_text()
    assert readme.startswith("# Vector norms") and "pip install" in readme
    assert "vector_norms/tests" in (tmp_path / "template" / "pytest.ini").read_text()


def test_a_readme_without_a_template_or_forbidden_apis(lesson):
    """A lesson with no README template of its own gets a plain page; one that forbids nothing still gets one."""
    from dataclasses import replace

    bare = replace(lesson, title="Norms {and} more", contract=replace(lesson.contract, forbidden=()))
    readme = student_readme(bare)
    assert readme.startswith("# Norms {and} more\n") and "## Set up" in readme
    assert classroom_forbidden(lesson) == "`torch.linalg.vector_norm` or `torch.nn.functional.normalize`"
