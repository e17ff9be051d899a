"""The student release is generated from solutions/, committed, and leaks no solution line."""

import ast
import json
import re

import pytest

from autograder.commands.classroom import write_template
from autograder.errors import KitError
from autograder.judge.hidden_suite import collect_rubric
from lesson import LESSON, MODULES, NOTEBOOK, RELEASE, SOLUTIONS
from autograder.commands.release import diff_release, find_regions, notebook_solution_lines, render_release, solution_lines, strip_solutions, write_release

SOURCE = '''\
class Model:
    def forward(self, x):
        """Doc."""
        ### BEGIN SOLUTION
        ### HINT: add one.
        y = x + 1
        return y
        ### END SOLUTION


def helper():
    ### BEGIN SOLUTION
    return 2
    ### END SOLUTION
'''


def test_regions_become_stubs_that_name_the_function_and_keep_the_hint():
    out = strip_solutions(SOURCE)
    assert "y = x + 1" not in out and "return 2" not in out
    assert '        raise NotImplementedError("Model.forward is not implemented yet")' in out
    assert '    raise NotImplementedError("helper is not implemented yet")' in out
    assert "        # Hint: add one." in out
    assert '"""Doc."""' in out, "text outside the regions must be copied unchanged"
    ast.parse(out)  # the stub is valid Python


def test_stub_raises_not_implemented_when_called():
    namespace = {}
    exec(compile(strip_solutions(SOURCE), "<stub>", "exec"), namespace)
    with pytest.raises(NotImplementedError, match="helper"):
        namespace["helper"]()


@pytest.mark.parametrize(
    "text, message",
    [
        ("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION\n", "inside the region opened at line 1"),
        ("x = 1\n### END SOLUTION\n", "without a matching"),
        ("### BEGIN SOLUTION\nx = 1\n", "never closed"),
        ("### HINT: stray\n", "outside a solution region"),
    ],
)
def test_unbalanced_markers_are_one_line_errors_with_file_and_line(text, message):
    with pytest.raises(KitError, match=message) as info:
        find_regions(text, "f.py")
    assert str(info.value).startswith("f.py:") and "\n" not in str(info.value)


def test_committed_release_matches_a_fresh_generation():
    assert diff_release(SOLUTIONS, RELEASE) == []


def test_generation_is_deterministic_and_check_sees_drift(tmp_path):
    source = SOLUTIONS
    first, second = tmp_path / "a", tmp_path / "b"
    write_release(source, first)
    write_release(source, second)
    assert render_release(first) == render_release(second)
    assert diff_release(source, first) == []
    (first / "heads.py").write_text("edited by hand\n")
    (first / "extra.py").write_text("x = 1\n")
    (first / "attention.py").unlink()
    problems = diff_release(source, first)
    assert problems == ["missing: attention.py", "not generated from solutions/: extra.py", "differs: heads.py"]
    write_release(source, first)
    assert diff_release(source, first) == [], "a second release repairs every drift"


def test_every_student_module_has_regions_and_every_region_is_stubbed():
    for name in LESSON.student_files:
        text = (SOLUTIONS / name).read_text()
        assert find_regions(text, name), f"{name} has no solution region"
        released = (RELEASE / name).read_text()
        assert released.count("raise NotImplementedError") == len(find_regions(text, name))


@pytest.mark.check
def test_no_solution_line_appears_anywhere_in_assignments():
    leaked_from = {}
    for path in sorted(SOLUTIONS.rglob("*.py")):
        for line in solution_lines(path.read_text(), str(path)):
            leaked_from.setdefault(line, path.name)
    for path in sorted(SOLUTIONS.rglob("*.ipynb")):
        for line in notebook_solution_lines(path.read_text()):
            leaked_from.setdefault(line, path.name)
    assert len(leaked_from) > 30, "the solutions should have substantial regions to protect"
    for path in sorted(RELEASE.parent.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        text = path.read_text(errors="replace")
        if path.suffix == ".ipynb":  # compare with the cells' text, not the JSON escaping of it
            text = "\n".join("".join(cell["source"]) for cell in json.loads(text)["cells"])
        lines = {line.strip() for line in text.splitlines()}
        for line, origin in leaked_from.items():
            leaked = line in lines or (len(line) >= 20 and line in text)
            assert not leaked, f"solution line from {origin} appears in {path}: {line!r}"


@pytest.mark.check
def test_release_contains_only_the_package_its_public_tests_and_the_notebook():
    assert sorted(p.name for p in RELEASE.parent.iterdir()) == [LESSON.id]
    released = sorted(p.relative_to(RELEASE).as_posix() for p in RELEASE.rglob("*")
                      if p.is_file() and "__pycache__" not in p.parts)
    assert released == sorted([
        "__init__.py", *LESSON.student_files, NOTEBOOK,
        "tests/checks.py", "tests/conftest.py", *(f"tests/test_{module}.py" for module in MODULES),
    ])


# Words that speak to the instructor or name the kit's insides, never in what students get (phrases may wrap).
# Student text may say "hidden checks" and "your instructor", so "hidden" and "instructor" alone are not here; the
# workflow's optional HIDDEN_TESTS_REPOSITORY step is student-visible on purpose, so the kit's folder name is
# matched case-sensitively.
INSTRUCTOR_WORDS = (
    r"\bsolutions/",  # the instructor's source folder
    r"(?i)\b(reference|model|instructor'?s?)\s+(solution|implementation|answer)s?\b",
    r"(?i)\banswer\s+key\b",
    r"(?i)\brubrics?\b",
    r"(?i)\binstructor[-\s]only\b",
    r"#{3} ?(BEGIN|END|HINT)",  # solution and hidden-test region markers
    r"\bhidden_tests\b",
    r"\bcheck_(attention|heads|positional_encoding|properties)\b",  # the hidden test modules
    r"@graded\b",
    r"(?i)\bautograder\b",  # the kit's package (GitHub's autograding-* actions are fine)
    r"(?i)\b(zygote|judge|mutants?|catalogue|gradescope|formgrader)\b",
    r"(?i)\bthe\s+kit\b|\bkit's\b",
)


def student_text(path):
    """What a student reads in ``path``: a notebook's cell sources (its nbgrader metadata is machinery)."""
    text = path.read_text(errors="replace")
    if path.suffix == ".ipynb":
        return "\n".join("".join(cell["source"]) for cell in json.loads(text)["cells"])
    return text


def instructor_words(text):
    """The instructor-side words and phrases found in ``text``."""
    return [match.group(0) for pattern in INSTRUCTOR_WORDS for match in re.finditer(pattern, text)]


@pytest.mark.parametrize("planted", ["the kit uses this to test the reference\nsolutions",
                                     "copied from solutions/mha_pe", "### BEGIN HIDDEN TESTS",
                                     "see autograder/hidden_tests/check_heads.py", "the judge's zygote",
                                     "Model answer: ...", "Rubric (2 points)"])
def test_the_scan_flags_instructor_words(planted):
    assert instructor_words(f"Some student text.\n{planted}\nMore text.")


def test_the_scan_passes_what_students_are_meant_to_read():
    fine = ("Your instructor grades a copy in a sandbox, with hidden checks. Hidden tests (optional) step: "
            "HIDDEN_TESTS_REPOSITORY. uses: classroom-resources/autograding-command-grader@v1. Your solution "
            "must be vectorized; compare with a reference value. # YOUR CODE HERE  # Hint: broadcast.")
    assert instructor_words(fine) == []


@pytest.mark.check
def test_nothing_a_student_gets_speaks_to_the_instructor(tmp_path):
    """Every file of assignments/ and of the Classroom template: no instructor words, no hidden check's details."""
    write_template(tmp_path / "template", LESSON)
    hidden = [entry for entry in collect_rubric(LESSON.hidden_tests) if entry.visibility == "hidden"]
    assert len(hidden) >= 5  # enough hidden checks for the scan to prove something
    files = [path for root in (RELEASE.parent, tmp_path / "template") for path in sorted(root.rglob("*"))
             if path.is_file() and "__pycache__" not in path.parts]
    assert len(files) >= 14
    for path in files:
        text = student_text(path)
        assert instructor_words(text) == [], f"{path}: speaks to the instructor"
        for entry in hidden:
            assert not re.search(rf"\b{entry.id}\b", text) and entry.concept not in text, f"{path}: shows {entry.id}"
