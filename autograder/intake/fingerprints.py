"""What ``--resume`` compares: a fingerprint of the engine's code that decides grades and the lesson's grading
inputs (``grader_fingerprint``), and of one submission under it (``fingerprint``). Reports, shipping and tools do
not count, so editing them keeps saved results."""

import hashlib
import os
from pathlib import Path

# The engine's code that decides grades: the judge's side, the worker, intake. Reports, shipping and tools
# (bench, demo, release, Classroom, Gradescope) do not, so editing them keeps saved results (``--resume``).
GRADING_CODE = ("lesson/assignment.py", "lesson/reference.py", "intake/submission.py", "intake/fingerprints.py",
                "intake/forbidden.py", "intake/imports.py", "intake/source_tree.py", "sandbox/isolation.py",
                "records/results.py",
                "judge/remote.py", "judge/failures.py", "judge/rubric.py", "judge/hidden_suite.py", "judge/grade.py",
                "notebook/checks.py", "notebook/names.py", "notebook/cells.py", "notebook/verdicts.py",
                "notebook/executed.py", "notebook/stage.py", "worker")


def grading_code() -> list[Path]:
    """The engine's files that decide grades (``GRADING_CODE``), in a fixed order."""
    engine = Path(__file__).resolve().parents[1]
    paths = []
    for name in GRADING_CODE:
        path = engine / name
        paths += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return paths


def grader_fingerprint(inputs: list[Path]) -> str:
    """Hash of everything that decides a grade: the engine's grading code and the assignment's ``inputs`` (its
    reference, hidden tests, notebook, descriptor: ``Assignment.grading_inputs``)."""
    engine = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in grading_code() + [Path(path) for path in inputs]:
        name = Path(os.path.relpath(path, engine)).as_posix()  # the same on every checkout of the kit
        digest.update(name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def fingerprint(files: dict[str, bytes], grader: str) -> str:
    """Identifies a (submission, grader) pair, so ``--resume`` can skip work already done."""
    digest = hashlib.sha256(grader.encode())
    for module in sorted(files):
        digest.update(module.encode() + b"\0" + files[module] + b"\0")
    return digest.hexdigest()[:16]
