"""``make demo``: grade a bundled sample class in the sandbox and show the gradebook.

The class is assembled from the repository: the reference solutions, the
released stubs, the realistic bugs and the hostile submission that the
catalogue marks for the demo (``tests/catalogue/*.toml``), each with a
Check Your Understanding notebook (answered for the reference, blank for the
others), graded by the worker and judge and recorded in an nbgrader course.
"""

import shutil
from pathlib import Path

from . import paths
from .figures import encoding_heatmap
from .grading import grade_class
from .mutants import build, copy_package, load_catalogue
from .notebooks import NOTEBOOK, SOURCE_NOTEBOOK

CATALOGUE = paths.REPO_ROOT / "tests" / "catalogue"


def sample_class(class_dir):
    """Write the sample class into ``class_dir`` (replacing it); return the student ids."""
    class_dir = Path(class_dir)
    if class_dir.exists():
        shutil.rmtree(class_dir)
    copy_package(paths.SOLUTIONS_DIR / paths.ASSIGNMENT_ID, class_dir / "reference")
    copy_package(paths.ASSIGNMENTS_DIR / paths.ASSIGNMENT_ID, class_dir / "stubs")
    for kind, file in (("bug", "bugs.toml"), ("hostile", "hostile.toml")):
        for mutant in load_catalogue(CATALOGUE / file, kind):
            if mutant.demo:
                build(mutant, class_dir / f"{kind}-{mutant.id}")
    # Notebooks: the reference hands in the answered source, everyone else the blank release.
    for student in class_dir.iterdir():
        blank = paths.ASSIGNMENTS_DIR / paths.ASSIGNMENT_ID / NOTEBOOK
        source = SOURCE_NOTEBOOK if student.name == "reference" else blank
        shutil.copyfile(source, student / NOTEBOOK)
    return sorted(entry.name for entry in class_dir.iterdir())


def run_demo(out_dir, sandbox_mode="auto", emit=print):
    """Grade the sample class under ``out_dir``; return the exit status (0 when the reference gets every point that
    is graded automatically: code and the notebook's checks; its written answers are pending)."""
    out_dir = Path(out_dir)
    students = sample_class(out_dir / "class")
    emit(f"sample class: {', '.join(students)}")
    results = grade_class(out_dir / "class", out_dir / "graded", jobs=2, sandbox_mode=sandbox_mode, emit=emit)
    emit("")
    emit((out_dir / "graded" / "gradebook.csv").read_text().rstrip())
    emit("")
    reference = next(result for result in results if result.student == "reference")
    heatmap = encoding_heatmap(_reference_table(), out_dir / "figures" / "positional_encoding.png",
                               title="Positional encoding of 50 positions, d_model = 128")
    emit(f"class report: {out_dir / 'graded' / 'report.md'}")
    emit(f"feedback:     {out_dir / 'graded' / 'feedback'}/")
    emit(f"heatmap:      {heatmap}")
    # Full marks for everything graded automatically; the written answers wait for formgrader (pending).
    graded = sum(test.max_score for test in reference.tests if test.status != "pending")
    return 0 if reference.score == graded > 0 else 1


def _reference_table():
    from .reference import load_reference

    return load_reference().get_positional_encoding(50, 128).numpy()
