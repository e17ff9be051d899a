"""The student release is generated from solutions/, committed, and leaks no solution line."""

import ast
import json

import pytest

from autograder import paths
from autograder.errors import KitError
from autograder.release import (diff_release, find_regions, notebook_solution_lines, render_release, solution_lines,
                                strip_solutions, write_release)

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
    assert diff_release(paths.SOLUTIONS_DIR / "mha_pe", paths.ASSIGNMENTS_DIR / "mha_pe") == []


def test_generation_is_deterministic_and_check_sees_drift(tmp_path):
    source = paths.SOLUTIONS_DIR / "mha_pe"
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
    for name in paths.STUDENT_MODULES:
        text = (paths.SOLUTIONS_DIR / "mha_pe" / name).read_text()
        assert find_regions(text, name), f"{name} has no solution region"
        released = (paths.ASSIGNMENTS_DIR / "mha_pe" / name).read_text()
        assert released.count("raise NotImplementedError") == len(find_regions(text, name))


def test_no_solution_line_appears_anywhere_in_assignments():
    leaked_from = {}
    for path in sorted((paths.SOLUTIONS_DIR / "mha_pe").rglob("*.py")):
        for line in solution_lines(path.read_text(), str(path)):
            leaked_from.setdefault(line, path.name)
    for path in sorted((paths.SOLUTIONS_DIR / "mha_pe").rglob("*.ipynb")):
        for line in notebook_solution_lines(path.read_text()):
            leaked_from.setdefault(line, path.name)
    assert len(leaked_from) > 30, "the solutions should have substantial regions to protect"
    for path in sorted(paths.ASSIGNMENTS_DIR.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        text = path.read_text(errors="replace")
        if path.suffix == ".ipynb":  # compare with the cells' text, not the JSON escaping of it
            text = "\n".join("".join(cell["source"]) for cell in json.loads(text)["cells"])
        lines = {line.strip() for line in text.splitlines()}
        for line, origin in leaked_from.items():
            leaked = line in lines or (len(line) >= 20 and line in text)
            assert not leaked, f"solution line from {origin} appears in {path}: {line!r}"


def test_release_contains_only_the_package_its_public_tests_and_the_notebook():
    released = sorted(p.relative_to(paths.ASSIGNMENTS_DIR).as_posix() for p in paths.ASSIGNMENTS_DIR.rglob("*")
                      if p.is_file() and "__pycache__" not in p.parts)
    assert released == [
        "mha_pe/__init__.py",
        "mha_pe/attention.py",
        "mha_pe/check_your_understanding.ipynb",
        "mha_pe/heads.py",
        "mha_pe/positional_encoding.py",
        "mha_pe/tests/conftest.py",
        "mha_pe/tests/test_attention.py",
        "mha_pe/tests/test_heads.py",
        "mha_pe/tests/test_positional_encoding.py",
    ]
