"""Facts that prose restates where nothing can compute them (workflows, guides, docstrings): each must say
what its one source says."""

import re

import pytest

from autograder import paths
from autograder.lesson import pins
from autograder.commands.classroom import student_readme

import rubric_totals
from lesson import LESSON
from test_project import tracked_files

pytestmark = pytest.mark.check  # part of `make check`, the instructor's check


def forbidden_apis() -> set:
    """The one source of the forbidden APIs (read here only, so moving it changes this line alone)."""
    from lesson import CONTRACT

    return set(CONTRACT.forbidden)


# A torch version written where nothing can compute it: "torch==X", "torch X", "torch at `X`".
TORCH_VERSION = re.compile(r"\btorch(?:==|\s+at\s+`|\s+)(\d+\.\d+\.\d+)")


def test_every_torch_version_written_in_the_repository_is_pyprojects_pin():
    """Workflows and guides cannot compute the pin, so they state it; each statement must be pyproject's."""
    stated = {}
    for name in tracked_files():
        path = paths.REPO_ROOT / name
        if name == "pyproject.toml" or path.suffix in {".png", ".cjs"}:  # the source itself; no prose inside
            continue
        for version in TORCH_VERSION.findall(path.read_text(errors="replace")):
            stated.setdefault(version, set()).add(name)
    assert set(stated) == {pins.version("torch")}, stated
    # The files known to state it, so that the scan above cannot pass by reading nothing.
    assert {".github/workflows/ci.yml", ".github/workflows/grade-class.yml", "README.md",
            "docs/student-guide.md"} <= stated[pins.version("torch")]


# Where each list of forbidden APIs is written for people: (file, where the list starts, where it ends).
FORBIDDEN_LISTS = (
    ("solutions/mha_pe/attention.py", "You may not call", "here:"),
    ("assignments/mha_pe/attention.py", "You may not call", "here:"),
    ("docs/student-guide.md", "you may not call", "building it"),
    ("docs/mechanisms.md", "| `intake/forbidden.py` | static scan", ": attributes"),
)
# A backticked name of torch's, full or abbreviated (`nn.X`, `F.X`): an abbreviation names no entry, so it fails.
API = re.compile(r"`+((?:torch|nn|F)\.[\w.]+)`+")


def named_apis(text: str, start: str, end: str) -> set:
    """The torch names written between ``start`` and the next ``end``, whitespace and line breaks ignored."""
    text = " ".join(text.split())
    assert start in text, start
    passage = text[text.index(start):]
    assert end in passage, end
    return set(API.findall(passage[:passage.index(end)]))


def test_every_list_of_forbidden_apis_names_exactly_the_contracts():
    for name, start, end in FORBIDDEN_LISTS:
        assert named_apis((paths.REPO_ROOT / name).read_text(), start, end) == forbidden_apis(), name
    readme = student_readme(LESSON)
    assert named_apis(readme, "would do the work you are asked to write:", "Everything") == forbidden_apis(), (
        "the template's README")


def test_a_drifted_list_is_caught():
    drifted = "You may not call ``torch.nn.MultiheadAttention`` or ``F.scaled_dot_product_attention`` here:"
    assert named_apis(drifted, "You may not call", "here:") != forbidden_apis()


def test_the_instructor_guides_points_are_the_rubrics():
    """The guide restates the totals in prose; each number is the one computed from the suite and the notebook."""
    guide = " ".join((paths.REPO_ROOT / "docs" / "instructor-guide.md").read_text().split())
    notebook = rubric_totals.notebook()
    everything, without_cuda = rubric_totals.code_max(cuda=True), rubric_totals.code_max(cuda=False)
    auto, manual, gpu = f"{notebook.auto:g}", f"{notebook.manual:g}", f"{everything - without_cuda:g}"
    for phrase in (f"the assignment's total, {rubric_totals.total(cuda=True):g} (code",
                   f"notebook's {auto} autograded and {manual} written points; {rubric_totals.total(cuda=False):g} "
                   f"where the grading machine has no GPU, whose {gpu}-point check",
                   f"{everything:g} code points in four parts, {auto} autograded and {manual} written notebook points",
                   f"GPU check ({gpu} points)", f"elsewhere the code maximum is {without_cuda:g}."):
        assert phrase in guide, phrase


def test_the_student_guide_names_exactly_the_packages_students_may_import():
    """The guide states the descriptor's ``packages`` in prose (the template's README has them filled in)."""
    from lesson import CONTRACT

    text = " ".join((paths.REPO_ROOT / "docs" / "student-guide.md").read_text().split())
    start = text.index("you may import")
    stated = re.findall(r"`(\w+)`", text[start:text.index("(the grader", start)])
    assert stated == list(CONTRACT.packages)


def test_every_shard_count_stated_for_the_workflow_is_its_matrixs():
    """The workflow's matrix is the source; its step names, its grade and merge lines and the guide restate it."""
    import yaml

    text = (paths.REPO_ROOT / ".github" / "workflows" / "grade-class.yml").read_text()
    shards = yaml.safe_load(text)["jobs"]["grade"]["strategy"]["matrix"]["shard"]
    count = len(shards)
    assert shards == list(range(1, count + 1)) and count > 1
    assert f"of {count}" in text and f'--shard "$SHARD/{count}"' in text
    assert " ".join(f"shards/shard-{index}" for index in shards) + " --out graded" in text
    guide = " ".join((paths.REPO_ROOT / "docs" / "instructor-guide.md").read_text().split())
    for phrase in (f"the workflow below grades it in {count} shards", f"private copy of the kit, in {count} shards"):
        assert phrase in guide, phrase
