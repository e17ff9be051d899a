"""The project's shape: fixed top level, honest README, CI that runs the README's command, pinned torch."""

import ast
import re
import subprocess

import pytest

from autograder import paths
from autograder.errors import KitError
from autograder.lesson import pins

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
    with pytest.raises(KitError, match="no-such-package"):
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


# Bottom to top: a module may import its own layer and the layers below it, never one above.
LAYERS = (("errors", "paths", "worker"), ("lesson",), ("intake",), ("sandbox",), ("records",), ("judge",),
          ("notebook",), ("reports",), ("commands",), ("cli", "__main__", "__init__", "lesson_api"))


def _layer(module):
    """The layer index of ``autograder.<first>...`` (None for the lessons: content, not engine)."""
    first = module.split(".")[1] if "." in module else "__init__"
    if first == "lessons":
        return None
    return next(index for index, names in enumerate(LAYERS) if first in names)


def _imports(path, module):
    """Every ``autograder`` module ``path`` (the module ``module``) imports, absolute, lazy imports included."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                yield f"{target}.{alias.name}" if target == "autograder" else target
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


def test_the_folders_are_the_layers_and_every_import_points_down():
    """docs/design.md's layers are the engine's folders: each module imports only its own layer and those below
    (the worker, imported by nothing of the kit, is the base a sandboxed process can hold alone)."""
    engine = paths.REPO_ROOT / "autograder"
    upward, placed = [], set()
    for path in sorted(engine.rglob("*.py")):
        relative = path.relative_to(paths.REPO_ROOT).with_suffix("")
        module = ".".join(relative.parts[:-1] if relative.name == "__init__" else relative.parts)
        if "lessons" in relative.parts:
            continue
        mine = _layer(module)
        placed.add(module.split(".")[1] if "." in module else "__init__")
        for target in _imports(path, module):
            if target.startswith("autograder.") and _layer(target) is not None and _layer(target) > mine:
                upward.append(f"{module} imports {target}")
    assert not upward, upward
    assert not [path.name for path in engine.glob("*.py")
                if path.stem not in {name for names in LAYERS for name in names}], "a module outside the layers"
    # The worker stands alone: it imports nothing of the kit but itself.
    for path in (engine / "worker").rglob("*.py"):
        module = ".".join(path.relative_to(paths.REPO_ROOT).with_suffix("").parts)
        assert all(not target.startswith("autograder.") or target.startswith("autograder.worker")
                   for target in _imports(path, module)), path.name


def test_pyflakes_finds_no_unused_import_or_undefined_name():
    """`make check` runs pyflakes; CI (`make test`) holds the tree to it too, so a stray import never lands."""
    import sys

    found = subprocess.run([sys.executable, "-m", "pyflakes", "autograder", "tests", "solutions"],
                           cwd=paths.REPO_ROOT, capture_output=True, text=True)
    assert (found.returncode, found.stdout) == (0, "")
