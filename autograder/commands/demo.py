"""``make demo``: grade a bundled sample class in the sandbox and show the gradebook.

The class is assembled from the assignment (the kit's lesson by default): the
reference solutions, the released stubs, the realistic bugs and the hostile
submissions that its catalogue marks for the demo (``bugs.toml``,
``hostile.toml``), each with the notebook (answered for the reference, blank
for the others), graded by the worker and judge and recorded in an nbgrader
course.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from ..lesson.assignment import Assignment, resolve
from ..reports.figures import lesson_figures
from .grading import grade_class
from ..lesson.catalogue import build, copy_package, load_catalogue


def sample_class(class_dir: str | Path, assignment: Assignment) -> list[str]:
    """Write the sample class of ``assignment`` into ``class_dir`` (replacing it); return the student ids."""
    class_dir = Path(class_dir)
    if class_dir.exists():
        shutil.rmtree(class_dir)
    modules = assignment.contract.modules
    copy_package(assignment.solutions, class_dir / "reference", modules)
    copy_package(assignment.release, class_dir / "stubs", modules)
    for kind, file in (("bug", "bugs.toml"), ("hostile", "hostile.toml")):
        if (assignment.catalogue / file).is_file():
            for mutant in load_catalogue(assignment.catalogue / file, kind):
                if mutant.demo:
                    build(mutant, class_dir / f"{kind}-{mutant.id}", assignment)
    if assignment.notebook:  # the reference hands in the answered source, everyone else the blank release
        for student in class_dir.iterdir():
            source = assignment.source_notebook() if student.name == "reference" else assignment.released_notebook()
            shutil.copyfile(source, student / assignment.notebook)
    return sorted(entry.name for entry in class_dir.iterdir())


def run_demo(out_dir: str | Path, sandbox_mode: str = "auto", emit: Callable[[str], None] = print,
             assignment: Assignment | None = None) -> int:
    """Grade the sample class under ``out_dir``; return the exit status (0 when the reference gets every point that
    is graded automatically: code and the notebook's checks; its written answers are pending)."""
    assignment = resolve(assignment)
    out_dir = Path(out_dir)
    students = sample_class(out_dir / "class", assignment)
    emit(f"sample class: {', '.join(students)}")
    # The demo's class is the kit's own material: where no sandbox works it is graded unisolated, and says so.
    results = grade_class(out_dir / "class", out_dir / "graded", jobs=2, sandbox_mode=sandbox_mode, emit=emit,
                          assignment=assignment, unisolated_ok=True)
    emit("")
    unisolated = sorted({result.sandbox for result in results} - {"bwrap", "uid"})
    if unisolated:
        emit("SANDBOX OFF: these scores were graded without isolation (no sandbox works here; see above)")
    emit((out_dir / "graded" / "gradebook.csv").read_text().rstrip())
    emit("")
    reference = next(result for result in results if result.student == "reference")
    emit(f"class report: {out_dir / 'graded' / 'report.md'}")
    emit(f"feedback:     {out_dir / 'graded' / 'feedback'}/")
    for figure in lesson_figures(assignment, out_dir / "figures"):
        emit(f"figure:       {figure}")
    # Full marks for everything graded automatically; the written answers wait for formgrader (pending).
    graded = sum(test.max_score for test in reference.tests if test.status != "pending")
    return 0 if reference.score == graded > 0 else 1

