"""What the Gradescope zip and the Classroom template say of a lesson comes from that lesson: the zip's README.md is
the lesson's (never the kit's), and the template's workflow and requirements point only to sections its student
README has."""

import re
import zipfile

import pytest
import yaml

from autograder import paths
from autograder.cli import main
from autograder.commands.classroom import classroom_steps, classroom_workflow, student_readme, write_template
from autograder.commands.gradescope import build_package
from autograder.commands.release import release
from autograder.lesson import assignment as assignments
from lesson import LESSON

# A student README without the kit lesson's "How you are graded" (nor any section on grading).
PLAIN = "# {title}: the plain page\n\n{setup}## Check your work\n\n```\n# not a heading\n.venv/bin/python -m pytest\n```\n"


@pytest.fixture(scope="module")
def lesson(tmp_path_factory):
    """A lesson written by ``new-lesson`` outside the kit, with a student README of this test's own, released."""
    folder = tmp_path_factory.mktemp("author") / "lesson"
    assert main(["new-lesson", "readme1", "--to", str(folder)]) == 0
    (folder / "student_readme.md").write_text(PLAIN)
    (folder / "README.md").unlink(missing_ok=True)
    made = assignments.load(folder)
    assert release(made)[0]
    return made


def pointers(text: str) -> list[str]:
    """The README sections a text points to (``README.md, "Title",``)."""
    return re.findall(r'README\.md, "([^"]+)",', text)


def headings(readme: str) -> list[str]:
    return re.findall(r"^#+ (.+)$", re.sub(r"```.*?```", "", readme, flags=re.S), re.M)


def test_the_zip_carries_the_lessons_student_readme_not_the_kits(lesson, tmp_path):
    with zipfile.ZipFile(build_package(tmp_path / "autograder.zip", lesson)) as opened:
        readme = opened.read("README.md").decode()
    assert readme == student_readme(lesson)
    assert readme.startswith(f"# {lesson.title}: the plain page\n")
    assert readme != (paths.REPO_ROOT / "README.md").read_text()


def test_the_zip_carries_the_lessons_own_readme_where_it_has_one(lesson, tmp_path):
    own = lesson.folder / "README.md"
    own.write_text("# For the instructor\n\nThis lesson's own notes.\n")
    try:
        with zipfile.ZipFile(build_package(tmp_path / "autograder.zip", lesson)) as opened:
            assert opened.read("README.md").decode() == "# For the instructor\n\nThis lesson's own notes.\n"
            assert opened.namelist().count("README.md") == 1
    finally:
        own.unlink()


def test_a_readme_without_a_grading_section_gets_no_pointer_to_one(lesson, tmp_path):
    files = write_template(tmp_path / "template", lesson)
    assert {"README.md", ".github/workflows/classroom.yml", "requirements.txt"} <= set(files)
    readme = (tmp_path / "template" / "README.md").read_text()
    workflow = (tmp_path / "template" / ".github/workflows/classroom.yml").read_text()
    requirements = (tmp_path / "template" / "requirements.txt").read_text()
    assert headings(readme) == [f"{lesson.title}: the plain page", "Set up", "Check your work"]
    assert pointers(workflow) == []
    assert workflow.startswith("# GitHub Classroom feedback: the public tests run once; each test function earns 1 "
                               "point,\n# pass or fail as a whole. These points are not your grade: the grade comes "
                               "from your\n# instructor's own run of the grader.\nname: Autograding Tests\n")
    assert yaml.safe_load(workflow)["name"] == "Autograding Tests"
    assert pointers(requirements) == ["Set up"]


def test_the_pointers_name_the_lessons_own_section_titles(lesson):
    steps = classroom_steps(lesson)
    readme = "# Norms\n\n## Grading and deadlines\n\nSee the syllabus.\n"
    workflow = classroom_workflow(lesson, steps, readme)
    assert pointers(workflow) == ["Grading and deadlines"]
    assert ('These points are not your grade: README.md, "Grading and deadlines", says how the two relate.\n'
            in workflow)
    # The kit's lesson keeps its pointer: its README has the section.
    kit = classroom_workflow(LESSON, classroom_steps(LESSON), student_readme(LESSON, tests=0))
    assert pointers(kit) == ["How you are graded"]
