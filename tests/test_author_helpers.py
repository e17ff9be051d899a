"""What a lesson author used to find out from a failing class, said once at collection or by ``validate``: a class of
the descriptor that is no ``nn.Module`` with a forward, a hidden test reading a method the student object's proxy
lacks, each check's points per case, and the catalogued bugs no public test catches."""

import shutil

import pytest

from autograder.cli import main
from autograder.commands.grading import grade_class
from autograder.commands.new_lesson import scaffold
from autograder.commands.release import release
from autograder.commands.validate import points_per_check
from autograder.errors import KitError
from autograder.judge.hidden_suite import PROXY_METHODS, HiddenSuite, collect_rubric, proxy_problems
from autograder.judge.rubric import RubricEntry
from autograder.lesson import assignment as assignments
from autograder.lesson.catalogue import copy_package, load_catalogue
from autograder.lesson.public_tests import uncaught_by_public_tests

PLAIN_CLASS = '''

class Scaler:
    """Multiplies by a factor: a plain class, called through __call__."""

    def __init__(self, factor):
        self.factor = factor

    def __call__(self, x):
        return x * self.factor
'''
MODULE_CLASS = '''

class Scaler(torch.nn.Module):
    """Multiplies by a factor."""

    def __init__(self, factor):
        super().__init__()
        self.factor = factor
{forward}'''
FORWARD = '''
    def forward(self, x):
        return x * self.factor
'''


def _with_class(folder, source, lesson_id):
    """The skeleton ``lesson_id`` with ``Scaler`` (``source``) added to center.py, the descriptor's files and its
    classes. Each test has its own id: a process imports a lesson's reference once, by its id."""
    scaffold(lesson_id, folder)
    with (folder / "solutions" / lesson_id / "center.py").open("a") as file:
        file.write(source)
    descriptor = folder / "assignment.toml"
    text = descriptor.read_text().replace('classes = []', 'classes = ["Scaler"]')
    descriptor.write_text(text.replace('["center", "standardize"]', '["center", "standardize", "Scaler"]'))
    return assignments.load(folder)


@pytest.mark.parametrize("source", [PLAIN_CLASS, MODULE_CLASS.format(forward="")], ids=["plain", "no-forward"])
def test_a_class_that_is_no_module_with_a_forward_is_refused_at_collection_in_one_line(tmp_path, capsys, source):
    """Before, such a class failed every student's checks (a plain class's instance as a device problem); now the
    author reads one line when validate collects the hidden tests (grade: the test below)."""
    lesson = _with_class(tmp_path / "lesson", source, "plain" if source == PLAIN_CLASS else "noforward")
    line = ("class Scaler (the descriptor's classes) is not a torch.nn.Module with its own forward in the reference: "
            "the judge calls a student object's forward only (docs/authoring.md)")
    with pytest.raises(KitError, match="could not all be collected: " + line.replace("(", r"\(").replace(")", r"\)")):
        collect_rubric(lesson.hidden_tests, lesson)
    assert main(["validate", "--assignment", str(lesson.folder)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and line in err


@pytest.mark.slow  # grades a class
def test_grade_records_the_unfit_class_as_a_suite_problem_for_every_student(tmp_path):
    lesson = _with_class(tmp_path / "lesson", PLAIN_CLASS, "graded")
    assert release(lesson)[0]
    copy_package(lesson.solutions, tmp_path / "class" / "ada", lesson.contract.modules)
    result, = grade_class(tmp_path / "class", tmp_path / "out", assignment=lesson, emit=lambda line: None, jobs=1,
                          skip_notebook=True)
    assert [(failure.kind, failure.reason.split(" (the")[0]) for failure in result.grader_failures] == [
        ("suite_problem", "class Scaler")]


def test_a_module_with_a_forward_collects(tmp_path):
    lesson = _with_class(tmp_path / "lesson", MODULE_CLASS.format(forward=FORWARD), "withforward")
    assert len(collect_rubric(lesson.hidden_tests, lesson)) == 6


NAMED_METHOD = '''
import torch

from autograder.lesson_api import graded

GROUP = "scaler"


@graded(1, "Scaling multiplies by the factor.")
def test_scale(student):
    """the scaler"""
    model = student.Scaler(2.0)
    assert torch.equal(model(torch.ones(2)), torch.full((2,), 2.0))  # forward: supported
    model.tensors()
    model.child("inner").to("cpu").grads(torch.ones(2))  # the proxy's own methods, chained: supported
    assert torch.equal(model.scale(torch.ones(2)), torch.full((2,), 2.0))


@graded(1, "The factor is kept.")
def test_factor(student):
    """the factor"""
    assert student.new("Scaler", 3.0).factor == 3.0


@graded(1, "Other data.")
def test_other(student):
    """a name bound to a proxy, then to data: its attributes are the data's"""
    model = student.Scaler(2.0)
    model = torch.ones(2)
    assert model.shape == (2,)
'''


def test_a_hidden_test_reading_a_method_the_proxy_lacks_is_refused_at_collection(tmp_path):
    """The worker calls a student object's forward only (judge/remote.py, worker/session.py's op_method): a
    named method (``model.scale(x)``) or attribute would crash the check for every student. Collection names the
    line and what the proxy offers."""
    lesson = _with_class(tmp_path / "lesson", MODULE_CLASS.format(forward=FORWARD), "named")
    (lesson.hidden_tests / "check_scaler.py").write_text(NAMED_METHOD)
    offered = ", ".join(PROXY_METHODS)
    said = (f"on a student object: its proxy is called for forward (obj(...)) and offers only {offered} "
            "(docs/authoring.md, The student object)")
    assert proxy_problems(lesson.hidden_tests, lesson.contract.classes) == [
        f"check_scaler.py line 16 uses model.scale {said}",
        f"check_scaler.py line 22 uses student.new('Scaler', 3.0).factor {said}"]
    assert "call_seeded" in offered and "tensors" in offered
    with pytest.raises(KitError, match=r"check_scaler.py line 16 uses model.scale .* \(and 1 more\)$"):
        collect_rubric(lesson.hidden_tests)
    assert len(HiddenSuite.collect(lesson.hidden_tests).problems) == 2  # grade: a suite problem, every student


def test_the_kits_hidden_tests_use_only_what_the_proxy_offers():
    kit = assignments.default()
    assert proxy_problems(kit.hidden_tests, kit.contract.classes) == []


def _entry(test_id, points):
    return RubricEntry(id=test_id, name=test_id, group="g", points=points, concept="c")


def test_validate_states_each_parametrized_checks_points_per_case():
    entries = [_entry("test_a[1]", 0.5), _entry("test_a[2]", 0.5), _entry("test_a[3]", 0.5), _entry("test_a[4]", 0.5),
               _entry("test_b", 2), _entry("test_c[x]", 1), _entry("test_c[y]", 3), _entry("test_d", 1)]
    assert points_per_check(entries) == [
        "points per check (9 in all; a parametrized check earns its points once per case):",
        "  test_a: 4 cases x 0.5 = 2",
        "  test_c: 2 cases = 4",
        "  2 other check(s), one case each: 3"]


@pytest.mark.slow  # the public tests run over the catalogue
def test_the_bugs_no_public_test_catches_are_those_every_passing_public_test_still_passes(tmp_path):
    """The skeleton's public tests use 2-D inputs only: the mean over dimension 1 passes them. Without its public
    test of standardize, the wrong spread passes them too."""
    scaffold("centring", tmp_path / "lesson")
    lesson = assignments.load(tmp_path / "lesson")
    bugs = load_catalogue(lesson.catalogue / "bugs.toml", "bug")
    assert uncaught_by_public_tests(lesson, bugs) == ["mean-over-dimension-one"]
    tests = lesson.solutions / "tests" / "test_center.py"
    tests.write_text(tests.read_text().split("\n\ndef test_standardized")[0] + "\n")
    assert uncaught_by_public_tests(lesson, bugs) == ["mean-over-dimension-one", "spread-divides-by-d-minus-one"]
    assert uncaught_by_public_tests(lesson, []) == []
    shutil.rmtree(lesson.solutions / "tests")
    assert uncaught_by_public_tests(lesson, bugs[:1]) == ["mean-over-the-wrong-dimension"]  # no public test at all
