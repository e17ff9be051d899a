"""``python -m autograder modes``: the reference, with its notebook, graded in every sandbox this machine offers.

A grade must be the same in every sandbox (``bwrap``, and ``uid`` where bubblewrap is refused), so before a term
``make check`` grades the lesson's reference once in each mode that works here and says, mode by mode, whether it
works, why not where it does not, and whether every check's outcome matches the first working mode's. A mode this
machine lacks is named with its reason and is no failure; a working mode whose outcomes differ, or no working mode
at all, is.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import KitError
from ..lesson import assignment as assignments
from ..lesson.assignment import Assignment
from ..lesson.catalogue import copy_package
from ..sandbox import isolation
from .grading import grade_class

MODES = ("bwrap", "uid")  # what a grade of record may run in; "isolated" is whichever of these works first


@dataclass(frozen=True)
class ModeRun:
    """One mode's try: ``outcomes`` ({test id: status}) where it graded, else ``problem`` (why it cannot here)."""

    mode: str
    outcomes: dict | None = None
    score: float = 0.0
    max_score: float = 0.0
    problem: str = ""


def reference_class(assignment: Assignment, class_dir: Path) -> Path:
    """A class of one student, the reference with its source notebook (the written answers filled in)."""
    folder = copy_package(assignment.solutions, class_dir / "reference", assignment.contract.modules)
    if assignment.notebook:
        shutil.copyfile(assignment.source_notebook(), folder / assignment.notebook)
    return class_dir


def try_mode(assignment: Assignment, mode: str, scratch: Path) -> ModeRun:
    """Grade the reference under ``mode``, or say why this machine cannot."""
    try:
        isolation.choose_sandbox(mode)
    except KitError as error:
        return ModeRun(mode, problem=str(error))
    class_dir = reference_class(assignment, scratch / f"class-{mode}")
    results = grade_class(class_dir, scratch / f"out-{mode}", sandbox_mode=mode, emit=lambda line: None,
                          assignment=assignment)
    result = results[0]
    if result.sandbox != mode or result.grader_failures:
        why = "; ".join(failure.reason for failure in result.grader_failures) or f"graded under {result.sandbox}"
        return ModeRun(mode, problem=f"grading failed: {why}")
    return ModeRun(mode, {test.id: test.status for test in result.tests}, result.score, result.max_score)


def compare(runs: list[ModeRun]) -> list[str]:
    """Each working mode's outcomes against the first one's: the lines that say where they differ."""
    graded = [run for run in runs if run.outcomes is not None]
    if not graded:
        return ["no sandbox works on this machine"]
    first, problems = graded[0], []
    for run in graded[1:]:
        differ = sorted(test for test in first.outcomes.keys() | run.outcomes.keys()
                        if first.outcomes.get(test) != run.outcomes.get(test))
        if differ:
            problems.append(f"{run.mode} differs from {first.mode} in {len(differ)} checks: {', '.join(differ[:5])}")
    return problems


def check_modes(assignment: Assignment | str | None = None, emit: Callable[[str], None] = print) -> bool:
    """Grade the reference in each of :data:`MODES`; print one line per mode; True when every working mode gives
    the same outcomes (and at least one works)."""
    assignment = assignments.resolve(assignment)
    with tempfile.TemporaryDirectory(prefix="grader-modes-") as tmp:
        scratch = Path(tmp)
        scratch.chmod(0o711)  # a confined worker's user passes through to its own folders
        runs = []
        for mode in MODES:
            emit(f"{mode}: grading the reference with its notebook...")
            run = try_mode(assignment, mode, scratch)
            runs.append(run)
            if run.outcomes is None:
                emit(f"  {mode}: not available here: {run.problem}")
            else:
                emit(f"  {mode}: works ({run.score:g} of {run.max_score:g} points, {len(run.outcomes)} checks)")
    problems = compare(runs)
    for problem in problems:
        emit(f"modes: {problem}")
    if not problems:
        working = [run.mode for run in runs if run.outcomes is not None]
        emit(f"modes: the same outcome in {', '.join(working)}")
    return not problems
