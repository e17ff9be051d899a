"""``make demo``: grade a bundled sample class in the sandbox and show the gradebook.

The class is assembled from the assignment (the kit's lesson by default): the
reference solutions, the released stubs, the realistic bugs and the hostile
submissions that its catalogue marks for the demo (``bugs.toml``,
``hostile.toml``), each with the notebook (answered for the reference, blank
for the others), graded by the worker and judge and recorded in an nbgrader
course.

Where: ``--out``, else :func:`demo_folder`: ``build/demo`` in the lesson's own folder, or at the kit's root for
a lesson under ``autograder/lessons/``; the demo writes nothing else. Each run starts from an empty folder (its
previous class, records and nbgrader gradebook removed), so no other lesson's students are kept beside these.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from .. import paths
from ..errors import KitError
from ..lesson.assignment import LESSONS_DIR, Assignment, resolve
from ..lesson.catalogue import build, copy_package, load_catalogue
from ..reports.figures import lesson_figures
from .grading import grade_class

STAMP = ".kit-demo"  # marks a folder as the demo's own output, which the next run may empty
OUTPUTS = ("class", "graded", "figures")  # what a run writes beside the stamp (older runs wrote no stamp)


def demo_folder(assignment: Assignment) -> Path:
    """The demo's default output folder: ``build/demo`` in the lesson's folder, or at the kit's root for the
    kit's own lessons (their folder is the package, which must hold no build output)."""
    inside_kit = assignment.descriptor.is_relative_to(LESSONS_DIR)
    return (paths.REPO_ROOT if inside_kit else assignment.folder) / "build" / "demo"


def start_empty(out_dir: Path, default: bool = False) -> None:
    """Empty ``out_dir`` (a previous demo's output) and stamp it; KitError, touching nothing, for a folder that
    holds anything else: ``--out`` may name a folder of the user's own. Only the ``default`` folder is emptied
    unstamped (older runs wrote no stamp): an instructor's own ``class/`` elsewhere is never taken for the demo's."""
    if out_dir.exists():
        if not out_dir.is_dir():
            raise KitError(f"--out is not a folder: {out_dir}")
        names = {entry.name for entry in out_dir.iterdir()}
        if names and STAMP not in names and not (default and names <= set(OUTPUTS)):
            raise KitError(f"--out folder holds files the demo did not write: {out_dir} (name an empty or new one)")
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    (out_dir / STAMP).write_text("The kit's demo output: the next `demo` run empties this folder.\n")


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


def run_demo(out_dir: str | Path | None = None, sandbox_mode: str = "auto", emit: Callable[[str], None] = print,
             assignment: Assignment | None = None, jobs: int = 2) -> int:
    """Grade the sample class under ``out_dir`` (default :func:`demo_folder`), emptied first, with ``jobs``
    workers; return the exit status (0 when the reference gets every point that is graded automatically: code and
    the notebook's checks; its written answers are pending)."""
    assignment = resolve(assignment)
    if jobs < 1:
        raise KitError(f"--jobs must be at least 1, got {jobs}")
    default = out_dir is None
    out_dir = demo_folder(assignment) if default else Path(out_dir)
    start_empty(out_dir, default)
    students = sample_class(out_dir / "class", assignment)
    emit(f"sample class: {', '.join(students)}")
    # The demo's class is the kit's own material: where no sandbox works it is graded unisolated, and says so.
    results = grade_class(out_dir / "class", out_dir / "graded", jobs=jobs, sandbox_mode=sandbox_mode, emit=emit,
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

