"""A lesson written by ``new-lesson`` outside the kit's folder goes through every command unchanged: release,
validate, grade (its notebook too), rubric and figures into its own folder, and a Gradescope zip that packs it and
no other lesson. Its hidden tests import the engine through ``autograder.lesson_api`` alone, and a broken
``center`` is charged to center alone through the engine's gate. Also the author's mistakes the skeleton's pieces
guard against: one-line errors, nothing half-written."""

import ast
import json
import shutil
import os
import subprocess
import sys
import zipfile
from dataclasses import replace

import pytest

from autograder.lesson import assignment as assignments
from autograder import paths
from autograder.commands.classroom import student_readme, write_template
from autograder.cli import main
from autograder.errors import KitError
from autograder.commands.gradescope import build_package
from autograder.commands.grading import grade_class
from autograder.judge.hidden_suite import collect_rubric
from autograder.lesson.catalogue import build, copy_package, distinct_ids, load_catalogue
from autograder.commands.new_lesson import scaffold
from autograder.commands.release import release
from autograder.commands.validate import validate

LESSON_ID = "centring"


@pytest.fixture(scope="module")
def lesson(tmp_path_factory):
    """The skeleton, written and released in a folder of its own (never inside the kit)."""
    folder = tmp_path_factory.mktemp("author") / LESSON_ID
    assert main(["new-lesson", LESSON_ID, "--to", str(folder)]) == 0
    assert not folder.is_relative_to(paths.REPO_ROOT)
    made = assignments.load(folder)
    ok, _ = release(made)
    assert ok and (made.release / "center.py").is_file()
    return made


@pytest.mark.slow
def test_the_skeleton_validates(lesson):
    lines = []
    assert validate(assignment=lesson, emit=lines.append, jobs=1), "\n".join(lines)
    assert "mutation score: 3/3 bugs caught (100%)" in lines
    assert "correct variants keeping their points: 2/2" in lines
    # The bug in center: standardize's check waits for center, charged to center's concept (mean), never to spread.
    assert ("  mean-over-the-wrong-dimension [mean] -5: test_center_matches_the_reference (mean), "
            "test_center_keeps_any_shape[2x5] (mean), test_center_keeps_any_shape[2x3x5] (mean), "
            "test_standardize_matches_the_reference (mean, waits for center)") in lines
    # Per-case points, and the one bug the public tests (2-D inputs only) cannot see.
    at = lines.index("points per check (6.5 in all; a parametrized check earns its points once per case):")
    assert lines[at + 1:at + 3] == ["  test_center_keeps_any_shape: 3 cases x 0.5 = 1.5",
                                    "  3 other check(s), one case each: 5"]
    assert ("Caught by no public test: mean-over-dimension-one (1 of 3 bugs; a report only: students meet these "
            "first in the hidden checks)") in lines


def test_the_skeleton_grades_code_and_notebook_and_charges_a_broken_center_once(lesson, tmp_path):
    """The reference (with the solved notebook) earns every automatic point and waits for its written answer in
    formgrader; the stubs earn nothing; a bug in center loses center's points, and standardize's check is not
    checked, charged to center's concept instead of its own."""
    class_dir = tmp_path / "class"
    copy_package(lesson.solutions, class_dir / "ada", lesson.contract.modules)
    shutil.copyfile(lesson.source_notebook(), class_dir / "ada" / lesson.notebook)
    copy_package(lesson.release, class_dir / "sam", lesson.contract.modules)
    shutil.copyfile(lesson.released_notebook(), class_dir / "sam" / lesson.notebook)
    bug = next(bug for bug in load_catalogue(lesson.catalogue / "bugs.toml", "bug")
               if bug.id == "mean-over-the-wrong-dimension")
    build(bug, class_dir / "bob", lesson)
    results = {result.student: result for result in grade_class(class_dir, tmp_path / "out", assignment=lesson,
                                                                 emit=lambda line: None, jobs=1)}
    code = sum(entry.points for entry in collect_rubric(lesson.hidden_tests, lesson))
    assert code == 6.5 and results["ada"].max_score == code + 1 + 2  # + the autograded cell and the written answer
    ada = {test.id: test for test in results["ada"].tests}
    assert results["ada"].score == code + 1 and ada["written::a_why_first"].status == "pending"
    assert all(test.status == "passed" for name, test in ada.items() if name != "written::a_why_first")
    assert results["sam"].score == 0
    bob = {test.id: (test.status, test.cause and test.cause.kind, test.charged_to, test.blocked_by)
           for test in results["bob"].tests if test.group in ("center", "standardize")}
    assert bob == {"test_center_matches_the_reference": ("failed", "wrong_value", "", ""),
                   "test_center_keeps_any_shape[5]": ("passed", None, "", ""),
                   "test_center_keeps_any_shape[2x5]": ("failed", "wrong_value", "", ""),
                   "test_center_keeps_any_shape[2x3x5]": ("failed", "wrong_value", "", ""),
                   "test_a_constant_vector_becomes_zeros": ("passed", None, "", ""),
                   "test_standardize_matches_the_reference": ("failed", "not_checked", "mean", "center")}
    assert results["bob"].score == 1.5  # bob handed in no notebook
    assert (tmp_path / "out" / "gradebook.csv").is_file() and (tmp_path / "out" / "report.md").is_file()
    # The written answer reaches formgrader: nbgrader's gradebook holds it, waiting for a manual grade.
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{tmp_path / 'out' / 'nbgrader' / 'gradebook.db'}") as book:
        written = book.find_grade("a_why_first", "check_your_understanding", LESSON_ID, "ada")
        assert (written.needs_manual_grade, written.max_score) == (True, 2.0)


def test_the_skeletons_hidden_tests_import_the_engine_through_the_lesson_api_alone(lesson):
    imported = set()
    for path in lesson.hidden_tests.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
    assert {name for name in imported if name.startswith("autograder")} == {"autograder.lesson_api"}


def test_its_pages_go_to_its_own_folder_never_the_kits(lesson):
    kit_rubric = paths.REPO_ROOT / "docs" / "rubric.md"
    before = kit_rubric.read_bytes()
    assert main(["rubric", "--assignment", str(lesson.folder)]) == 0
    assert kit_rubric.read_bytes() == before
    page = (lesson.folder / "rubric.md").read_text()
    assert "center agrees with the reference" in page
    assert "| by_hand_test | 1 | automatically |" in page and "| a_why_first | 2 | by the instructor |" in page
    assert "Code: 6.5 points. Notebook: 1 autograded + 2 written. Total: 9.5." in page


@pytest.mark.slow
def test_its_gradescope_zip_is_built_from_outside_the_kit_and_packs_only_this_lesson(lesson, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    archive = build_package(tmp_path / "autograder.zip", lesson)
    with zipfile.ZipFile(archive) as opened:
        names = opened.namelist()
        opened.extractall(tmp_path / "autograder" / "source")
    others = [other.name for other in (paths.REPO_ROOT / "autograder" / "lessons").iterdir() if other.is_dir()
              and other.name != "__pycache__"] + ["vector_norms"]
    assert others and not any(other in name for name in names for other in others), "another lesson's files"
    assert not [name for name in names if name.startswith("autograder/lessons/") and name != "autograder/lessons/__init__.py"]
    assert {"autograder/judge/grade.py", f"lesson/solutions/{LESSON_ID}/center.py", "lesson/hidden_tests/check_center.py",
            "lesson/assignment.toml"} <= set(names)
    # The zip grades on its own: its run_autograder, this lesson's reference, from the unpacked tree.
    root = tmp_path / "autograder"
    copy_package(lesson.solutions, root / "submission", lesson.contract.modules)
    (root / "results").mkdir()
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), AUTOGRADER_PYTHON=sys.executable)
    done = subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((root / "results" / "results.json").read_text())
    assert results["score"] == sum(test["max_score"] for test in results["tests"]) == 6.5  # no notebook handed in


def test_new_lesson_refuses_a_bad_id_or_a_used_folder(tmp_path, capsys):
    with pytest.raises(KitError, match="lower-case Python package name"):
        scaffold("Not-A-Name", tmp_path / "x")
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "keep.txt").write_text("mine")
    assert main(["new-lesson", "fine", "--to", str(tmp_path / "used")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert (tmp_path / "used" / "keep.txt").read_text() == "mine" and len(list((tmp_path / "used").iterdir())) == 1


def test_a_readme_brace_is_the_lessons_own_and_nothing_is_half_written(lesson, tmp_path):
    """Only the named placeholders are filled: LaTeX braces stay; an unknown name stays as written."""
    readme = lesson.folder / "student_readme.md"
    original = readme.read_text()
    try:
        readme.write_text("# {title}\n\nThe angle $\\theta_{i}$ and {unknown} stay; public tests: {seconds}.\n")
        text = student_readme(lesson)
        assert text.startswith("# Centring vectors\n") and "$\\theta_{i}$ and {unknown} stay" in text
        assert "public tests: a few seconds." in text
        # A public test file that is no student file's: the template cannot be built, and nothing is written.
        unplaced = lesson.solutions / "tests" / "test_unplaced.py"
        unplaced.write_text("def test_x():\n    pass\n")
        assert release(lesson)[0]
        with pytest.raises(KitError, match="without Classroom steps"):
            write_template(tmp_path / "template", lesson)
        assert not (tmp_path / "template").exists() or not any((tmp_path / "template").iterdir())
    finally:
        readme.write_text(original)
        (lesson.solutions / "tests" / "test_unplaced.py").unlink(missing_ok=True)
        (lesson.release / "tests" / "test_unplaced.py").unlink(missing_ok=True)
        assert release(lesson)[0]


def test_a_hidden_test_that_cannot_be_collected_is_one_line(lesson, tmp_path, capsys):
    broken = lesson.hidden_tests / "check_broken.py"
    broken.write_text("def test_x(:\n")
    try:
        with pytest.raises(KitError, match="could not all be collected: .*SyntaxError"):
            collect_rubric(lesson.hidden_tests)
        assert main(["rubric", "--assignment", str(lesson.folder), "--to", str(tmp_path / "r.md")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
        assert not (tmp_path / "r.md").exists()
    finally:
        broken.unlink()


def test_a_misspelt_key_is_refused_by_name_never_ignored(tmp_path):
    """A key no code reads would do nothing (``forbiden = [...]`` forbids nothing, ``catch = [...]`` checks
    nothing): the descriptor and the catalogue refuse it in one line that names it."""
    folder = tmp_path / "lesson"
    scaffold("spelt", folder)
    descriptor = folder / "assignment.toml"
    descriptor.write_text(descriptor.read_text().replace("forbidden = []", "forbiden = []"))
    with pytest.raises(KitError, match=r"unknown key forbiden \(docs/authoring.md"):
        assignments.load(folder)
    descriptor.write_text(descriptor.read_text().replace("forbiden = []", "forbidden = []") + "\n[classroom]\nseconds = 3\n")
    with pytest.raises(KitError, match="unknown key classroom.seconds"):
        assignments.load(folder)
    bugs = folder / "catalogue" / "bugs.toml"
    bugs.write_text(bugs.read_text().replace("catches =", "catch =").replace('new = "', 'neww = "'))
    with pytest.raises(KitError, match="unknown key catch, edit.neww"):
        load_catalogue(bugs, "bug")


def test_catalogue_ids_are_folder_names_and_one_namespace(tmp_path):
    """Each id names a submission's folder in the class validate grades: an id that is not a plain name, or one
    a bug and a variant share (or ``reference``), would put a submission elsewhere or replace another's."""
    folder = tmp_path / "lesson"
    scaffold("ids", folder)
    bugs, variants = folder / "catalogue" / "bugs.toml", folder / "catalogue" / "variants.toml"
    bug_id = load_catalogue(bugs, "bug")[0].id
    text = bugs.read_text()
    bugs.write_text(text.replace(f'id = "{bug_id}"', 'id = "../elsewhere"'))
    with pytest.raises(KitError, match=r"ids must be letters, digits.*'\.\./elsewhere'"):
        load_catalogue(bugs, "bug")
    bugs.write_text(text)
    variant_id = load_catalogue(variants, "variant")[0].id
    variants.write_text(variants.read_text().replace(f'id = "{variant_id}"', f'id = "{bug_id}"'))
    with pytest.raises(KitError, match=f"catalogue id '{bug_id}' is used twice"):
        distinct_ids(load_catalogue(bugs, "bug"), load_catalogue(variants, "variant"), taken=("reference",))
    with pytest.raises(KitError, match="catalogue id 'reference' is used twice"):
        distinct_ids([replace(load_catalogue(bugs, "bug")[0], id="reference")], taken=("reference",))
    distinct_ids(load_catalogue(bugs, "bug"), taken=("reference",))  # apart, each file is fine
    with pytest.raises(KitError, match=r"catalogue's files\)$"):  # nothing reserved: no list of reserved ids
        distinct_ids(load_catalogue(bugs, "bug"), load_catalogue(variants, "variant"))
