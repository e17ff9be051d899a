"""What ``--resume`` compares: a fingerprint of the engine's code that decides grades and the lesson's grading
inputs (``grader_fingerprint``), and of one submission under it (``fingerprint``). Reports, shipping and tools do
not count, so editing them keeps saved results."""

import hashlib
import os
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[1]
# The engine's code that decides grades, by folder, so a module added to one counts without anyone listing it: every
# layer up to the notebook stage (worker, lesson, intake, sandbox, records, judge, notebook), the base modules, and
# the commands that grade one student (the judge's loop and pool, and the plan, which says what is graded with
# which fingerprint). Reports, the CLI and the other commands (bench, demo, release, Classroom, Gradescope...) do
# not, so editing them keeps saved results (``--resume``). tests/test_record_binding.py proves every module the
# judge and worker import is here.
GRADING_FOLDERS = ("worker", "lesson", "intake", "sandbox", "records", "judge", "notebook")
GRADING_FILES = ("__init__.py", "errors.py", "paths.py", "commands/__init__.py", "commands/judge_loop.py",
                 "commands/judge_pool.py", "commands/planning.py")


def grading_code(engine: Path = ENGINE) -> list[Path]:
    """The engine's files that decide grades (``GRADING_FOLDERS``' Python files, ``GRADING_FILES``), in a fixed
    order; ``engine``: the kit's ``autograder/`` folder (another copy of it, in tests)."""
    paths = []
    for name in GRADING_FOLDERS:
        paths += sorted((engine / name).rglob("*.py"))
    return paths + [engine / name for name in GRADING_FILES]


def grader_fingerprint(inputs: list[Path], engine: Path = ENGINE) -> str:
    """Hash of everything that decides a grade: the engine's grading code and the assignment's ``inputs`` (its
    reference, hidden tests, notebook, descriptor: ``Assignment.grading_inputs``)."""
    digest = hashlib.sha256()
    for path in grading_code(engine) + [Path(path) for path in inputs]:
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
