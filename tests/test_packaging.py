"""A plain (non-editable) install gets the whole engine: every package under autograder/ and its data files."""

import shutil
import subprocess
import sys
import zipfile

from autograder import paths


def test_a_wheel_holds_every_package_and_every_file_the_engine_reads(tmp_path):
    source = tmp_path / "source"  # a copy, so the build leaves nothing in the repository
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copyfile(paths.REPO_ROOT / name, source / name)
    shutil.copytree(paths.REPO_ROOT / "autograder", source / "autograder",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                           "-q", "-w", str(tmp_path / "dist"), str(source)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as opened:
        packed = set(opened.namelist())
    packages = {path.parent.relative_to(source).as_posix() for path in (source / "autograder").rglob("__init__.py")}
    assert {"autograder", "autograder/worker", "autograder/reports", "autograder/lessons/mha_pe/hidden_tests"} <= packages
    assert {f"{package}/__init__.py" for package in packages} <= packed
    # Every file of the engine, modules and data alike (the hidden tests' pytest.ini, actionlint's runner).
    files = {path.relative_to(source).as_posix() for path in (source / "autograder").rglob("*") if path.is_file()}
    lesson = "autograder/lessons/mha_pe"
    assert {"autograder/tools/actionlint.cjs", f"{lesson}/hidden_tests/pytest.ini", f"{lesson}/assignment.toml",
            f"{lesson}/catalogue/bugs.toml", f"{lesson}/student_readme.md"} <= files
    assert sorted(files - packed) == []
