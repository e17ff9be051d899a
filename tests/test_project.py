"""The project's shape: fixed top level, honest README, CI that runs the README's command, pinned torch."""

import re
import subprocess

import pytest

from autograder import paths, pins

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ALLOWED_TOP = {"assignments", "solutions", "autograder", "docs", "tests", "README.md", "pyproject.toml", "Makefile",
               ".ci", ".github", "nbgrader_config.py", ".gitignore"}


def tracked_files():
    out = subprocess.run(["git", "ls-files"], cwd=paths.REPO_ROOT, capture_output=True, text=True, check=True).stdout
    return out.split()


def test_top_level_holds_only_the_agreed_entries():
    top = {name.split("/")[0] for name in tracked_files()}
    assert top, "the kit is a git checkout"
    assert top <= ALLOWED_TOP, f"unexpected top-level entries: {sorted(top - ALLOWED_TOP)}"


def test_readme_gives_the_two_commands_and_ci_runs_the_test_one():
    readme = (paths.REPO_ROOT / "README.md").read_text()
    assert "make demo" in readme and "make test" in readme
    assert "make test" in (paths.REPO_ROOT / ".ci" / "run").read_text()


def test_dependencies_are_pinned_and_this_environment_has_the_pinned_torch():
    import torch

    project = tomllib.loads((paths.REPO_ROOT / "pyproject.toml").read_text())["project"]
    requirements = project["dependencies"] + project["optional-dependencies"]["dev"]
    assert all("==" in requirement for requirement in requirements), requirements
    assert pins.pin("torch") in requirements and pins.pin("torch") == f"torch=={pins.version('torch')}"
    assert torch.__version__.split("+")[0] == pins.version("torch"), "the tests run on the pinned torch"
    with pytest.raises(LookupError, match="no-such-package"):
        pins.pin("no-such-package")


def test_the_engine_holds_no_lesson():
    """The lesson lives in its descriptor and its folder (``autograder/lessons/``): no file of the engine names
    its package, its files or its public names, so a second assignment needs no engine change."""
    from lesson import CONTRACT

    package = re.compile(r"\b(%s|%s)\b" % (CONTRACT.package, CONTRACT.package.replace("_", "-")), re.IGNORECASE)
    # Its public names, and its files as files ("attention" alone is just a word).
    words = {*CONTRACT.names, *(f"{module}.py" for module in CONTRACT.modules)}
    names = re.compile(r"\b(%s)(?!\w)" % "|".join(map(re.escape, sorted(words))))
    lessons = paths.REPO_ROOT / "autograder" / "lessons"
    engine = [path for path in (paths.REPO_ROOT / "autograder").rglob("*")
              if path.is_file() and path.suffix in (".py", ".cjs", ".toml", ".ini", ".md")
              and not path.is_relative_to(lessons) and "__pycache__" not in path.parts]
    assert len(engine) > 30
    found = {f"{path.relative_to(paths.REPO_ROOT)}: {match.group(0)}" for path in engine for pattern in (package, names)
             for match in pattern.finditer(path.read_text(encoding="utf-8"))}
    assert not found, sorted(found)
