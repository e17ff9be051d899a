"""A lesson written by ``new-lesson`` outside the kit's folder goes through every command unchanged: release,
validate, grade, rubric and figures into its own folder, and a Gradescope zip that packs it and no other lesson.
Also the author's mistakes the skeleton's pieces guard against: one-line errors, nothing half-written."""

import json
import os
import subprocess
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

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


def test_the_skeleton_validates_and_grades(lesson, tmp_path):
    lines = []
    assert validate(assignment=lesson, emit=lines.append, jobs=1), "\n".join(lines)
    assert any(line.startswith("mutation score: 1/1") for line in lines)
    assert any(line.startswith("correct variants keeping their points: 1/1") for line in lines)
    class_dir = tmp_path / "class"
    copy_package(lesson.solutions, class_dir / "ada", lesson.contract.modules)
    bug, = load_catalogue(lesson.catalogue / "bugs.toml", "bug")
    build(bug, class_dir / "bob", lesson)
    results = {result.student: result for result in grade_class(class_dir, tmp_path / "out", assignment=lesson,
                                                                 emit=lambda line: None)}
    assert results["ada"].score == results["ada"].max_score == sum(entry.points for entry in collect_rubric(
        lesson.hidden_tests))
    failed, = [test for test in results["bob"].tests if test.status == "failed"]
    assert failed.cause is not None and failed.cause.kind == "wrong_value"
    assert (tmp_path / "out" / "gradebook.csv").is_file() and (tmp_path / "out" / "report.md").is_file()


def test_its_pages_go_to_its_own_folder_never_the_kits(lesson):
    kit_rubric = paths.REPO_ROOT / "docs" / "rubric.md"
    before = kit_rubric.read_bytes()
    assert main(["rubric", "--assignment", str(lesson.folder)]) == 0
    assert kit_rubric.read_bytes() == before
    page = (lesson.folder / "rubric.md").read_text()
    assert "center agrees with the reference" in page and "notebook" not in page.lower()  # it has none


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
    assert results["score"] == sum(test["max_score"] for test in results["tests"]) == 3


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
