"""What ``--resume`` compares: a fingerprint of the engine's code that decides grades and the lesson's grading
inputs (``grader_fingerprint``), and of one submission under it (``fingerprint``). Reports, shipping and tools do
not count, so editing them keeps saved results."""

import hashlib
import os
import re
from collections.abc import Iterable
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[1]
# Where grading starts: every layer up to the notebook stage (worker, lesson, intake, sandbox, records, judge,
# notebook), whole, and the commands that grade one student (the judge's loop and pool, and the plan, which says
# what is graded with which fingerprint). Whatever these and the lesson's grading inputs (its hidden tests, hooks)
# import, lazily too, is found by reading their imports (:func:`grading_code`), so a module added anywhere they
# reach counts without anyone listing it. Reports, the CLI and the other commands (bench, demo, release, Classroom,
# Gradescope...) are reached by none of them, so editing them keeps saved results (``--resume``).
GRADING_FOLDERS = ("worker", "lesson", "intake", "sandbox", "records", "judge", "notebook")
GRADING_ROOTS = ("commands/judge_loop.py", "commands/judge_pool.py", "commands/planning.py")


# An import statement at a line's start, lazy (indented) ones too: ``from X import (a, b)`` or ``import a.b as c, d``.
# Read as text, not parsed: the whole engine in milliseconds, where ``ast`` takes a fifth of a second; a line of a
# docstring that reads as an import can only add a file (tests/test_record_binding.py checks the parse agrees).
_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]*)|import[ \t]+([^\n#;]*))",
                     re.MULTILINE)


def _imported(path: Path, engine: Path) -> set[tuple[str, ...]]:
    """The ``engine`` package's (``autograder``'s) modules ``path`` imports, lazily too, as name parts (a ``from``
    name as a module too: it may be one)."""
    inside = path.is_relative_to(engine.parent)  # a lesson outside the kit: its relative imports are its own
    package = path.relative_to(engine.parent).with_suffix("").parts[:-1] if inside else ()
    names = set()
    for source, imported, plain in _IMPORT.findall(path.read_text(encoding="utf-8", errors="replace")):
        aliases = [name.split(" as ")[0].strip(" \t\\\n") for name in (imported or plain).strip("()").split(",")]
        if plain:
            names.update(tuple(name.split(".")) for name in aliases if name)
            continue
        level = len(source) - len(source.lstrip("."))
        if level and not inside:
            continue
        module = (package[:len(package) - level + 1] if level else ()) + tuple(filter(None, source[level:].split(".")))
        names.add(module)
        names.update(module + (name,) for name in aliases if name.isidentifier())
    return {name for name in names if name[:1] == (engine.name,)}


def grading_code(engine: Path = ENGINE, inputs: Iterable[Path] = ()) -> list[Path]:
    """The engine's files that decide grades, in a fixed order: ``GRADING_FOLDERS``' Python files, ``GRADING_ROOTS``
    and every module of the engine these or the Python files of ``inputs`` (the lesson's) import, with the packages
    around them; ``engine``: the kit's ``autograder/`` folder (another copy of it, in tests)."""
    roots = [path for name in GRADING_FOLDERS for path in sorted((engine / name).rglob("*.py"))]
    roots += [engine / name for name in GRADING_ROOTS]
    lesson = {Path(path) for path in inputs if Path(path).suffix == ".py"}
    files: dict[tuple[str, ...], list[Path]] = {}  # a module's name -> its file, or its package's __init__.py

    def files_of(name: tuple[str, ...]) -> list[Path]:
        if name not in files:
            base = engine.parent.joinpath(*name)
            files[name] = [file for file in (base / "__init__.py", base.with_suffix(".py")) if file.is_file()]
        return files[name]

    reached, todo = set(), [*roots, *lesson]
    while todo:
        path = todo.pop()
        if path not in reached:
            reached.add(path)
            todo += [file for name in _imported(path, engine) for end in range(1, len(name) + 1)
                     for file in files_of(name[:end])]
    return roots + sorted(reached - set(roots) - lesson)


def grader_fingerprint(inputs: list[Path], engine: Path = ENGINE) -> str:
    """Hash of everything that decides a grade: the engine's grading code and the assignment's ``inputs`` (its
    reference, hidden tests, notebook, descriptor: ``Assignment.grading_inputs``)."""
    digest = hashlib.sha256()
    for path in grading_code(engine, inputs) + [Path(path) for path in inputs]:
        name = Path(os.path.relpath(path, engine)).as_posix()  # the same on every checkout of the kit
        content = path.read_bytes()
        digest.update(f"{name}\0{len(content)}\0".encode() + content)  # each file's bounds said: no two readings
    return digest.hexdigest()[:16]


def fingerprint(files: dict[str, bytes], grader: str) -> str:
    """Identifies a (submission, grader) pair, so ``--resume`` can skip work already done."""
    digest = hashlib.sha256(grader.encode())
    for module in sorted(files):
        digest.update(module.encode() + b"\0" + files[module] + b"\0")
    return digest.hexdigest()[:16]
