"""``python -m autograder validate``: prove the grader on known submissions, through the same path as ``grade``.

The reference solutions must get full marks and the released stubs zero.
"""

import tempfile
from pathlib import Path

from . import paths
from .grading import grade_class
from .mutants import copy_package


def validate(sandbox_mode="auto", jobs=2, emit=print):
    """Grade the reference and the stubs; print a table; return True when both are as expected."""
    with tempfile.TemporaryDirectory(prefix="mha-pe-validate-") as tmp:
        class_dir = Path(tmp) / "class"
        copy_package(paths.SOLUTIONS_DIR / paths.ASSIGNMENT_ID, class_dir / "reference")
        copy_package(paths.ASSIGNMENTS_DIR / paths.ASSIGNMENT_ID, class_dir / "stubs")
        results = {r.student: r for r in grade_class(class_dir, Path(tmp) / "out", jobs=jobs,
                                                     sandbox_mode=sandbox_mode, emit=lambda line: None)}
    expectations = {"reference": "full marks", "stubs": "zero"}
    ok = True
    emit(f"{'submission':<12} {'score':>9}  expected    verdict")
    for student, expected in expectations.items():
        result = results[student]
        good = result.score == result.max_score > 0 if expected == "full marks" else result.score == 0
        ok &= good
        emit(f"{student:<12} {result.score:>4g}/{result.max_score:<4g}  {expected:<10}  {'ok' if good else 'WRONG'}")
    return ok
