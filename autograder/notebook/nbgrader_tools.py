"""An assignment's nbgrader notebook through nbgrader's own commands: release it, and (for the bench's
comparison only) autograde a class with nbgrader's own kernels.

Grading itself no longer runs nbgrader's executor: see :mod:`autograder.notebook.stage` (the worker runs the
cells, the judge runs the checks) and :mod:`autograder.notebook.nbgrader_record` (nbgrader's course and database).
nbgrader runs in a child process (``python -m nbgrader``, with the environment's ``bin/`` on PATH, since it
calls ``alembic``).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from ..lesson.assignment import Assignment
from ..lesson.cpu_limited import machine_limits, run_limited
from ..errors import KitError
from ..intake.naming import nbgrader_safe_name

ENGINE_ROOT = Path(__file__).resolve().parents[2]  # on PYTHONPATH for nbgrader's kernels
COURSE_CONFIG = """\
# Written by python -m autograder grade: this folder is an nbgrader course for the notebook's grading.
# Open it with formgrader to grade the written answers, then run: python -m autograder final-gradebook OUT_DIR
c = get_config()
c.CourseDirectory.root = {root!r}
c.CourseDirectory.course_id = {course_id!r}
c.CourseDirectory.db_url = {db!r}
c.OverwriteCells.add_missing_cells = True   # a deleted grade cell is restored (and graded)
c.Execute.timeout = {timeout}
"""


def _environment(extra=None):
    """nbgrader's environment: this Python's bin/ first on PATH (for alembic), nothing else changed."""
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.update(extra or {})
    return env


def run_nbgrader(args: list[str], course_dir: str | Path, timeout: float = 600, extra_env: dict | None = None
                 ) -> subprocess.CompletedProcess:
    """Run ``nbgrader ARGS`` in ``course_dir``; raise KitError (with nbgrader's last line) when it fails.
    ``timeout``: seconds of CPU time (nbgrader's and its kernels'), so a crowded machine slows it, never fails it."""
    done = run_limited([sys.executable, "-m", "nbgrader", *args], machine_limits(timeout), f"nbgrader {args[0]}",
                       cwd=course_dir, env=_environment(extra_env))
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise KitError(f"nbgrader {args[0]} failed: {last[:300]}")
    return done


def _write_course(course_dir, assignment_id, name, source_bytes, timeout=60):
    course_dir = Path(course_dir).resolve()
    (course_dir / "source" / assignment_id).mkdir(parents=True, exist_ok=True)
    db = f"sqlite:///{course_dir / 'gradebook.db'}"
    (course_dir / "nbgrader_config.py").write_text(COURSE_CONFIG.format(root=str(course_dir), db=db, timeout=timeout,
                                                                        course_id=assignment_id))
    (course_dir / "source" / assignment_id / name).write_bytes(source_bytes)
    return course_dir


def release_notebook(source: str | Path, assignment_id: str) -> bytes:
    """The student version of the ``source`` notebook of assignment ``assignment_id``, as ``nbgrader
    generate_assignment`` writes it (bytes)."""
    source = Path(source)
    return _release_notebook(source.read_bytes(), source.name, assignment_id)


@functools.lru_cache(maxsize=4)
def _release_notebook(source_bytes, name, assignment_id):
    # A pure function of the source's bytes, so one process runs nbgrader once per version of the notebook.
    with tempfile.TemporaryDirectory(prefix="nbgrader-") as tmp:
        course = _write_course(tmp, assignment_id, name, source_bytes)
        run_nbgrader(["generate_assignment", assignment_id, "--force"], course)
        return (course / "release" / assignment_id / name).read_bytes()


def nbgrader_id(student: str) -> str:
    """The student's id inside nbgrader (folder names and database keys): injective and length-bounded."""
    return nbgrader_safe_name(student)


def autograde(course_dir: str | Path, assignment: Assignment, submissions: dict[str, bytes], timeout: float = 60
              ) -> None:
    """nbgrader's own ``autograde`` of ``{student: notebook bytes}`` in ``course_dir`` (kernels unsandboxed):
    the bench's yardstick for the notebook stage. Returns nothing; nbgrader's database holds the scores."""
    source = assignment.source_notebook()
    course = _write_course(course_dir, assignment.id, source.name, source.read_bytes(), timeout)
    for student, notebook in submissions.items():
        target = course / "submitted" / nbgrader_id(student) / assignment.id
        target.mkdir(parents=True, exist_ok=True)
        (target / source.name).write_bytes(notebook)
    run_nbgrader(["generate_assignment", assignment.id, "--force"], course)
    run_nbgrader(["autograde", assignment.id, "--create", "--force"], course,
                 timeout=max(600, 30 * len(submissions) * timeout), extra_env={"PYTHONPATH": str(ENGINE_ROOT)})


def source_cells(assignment: Assignment) -> dict[str, tuple[float, bool]]:
    """``{grade_id: (points, autograded)}`` of the assignment's source notebook's graded cells (``{}`` without
    a notebook)."""
    if assignment.notebook is None:
        return {}
    notebook = json.loads(assignment.source_notebook().read_text())
    cells = {}
    for cell in notebook["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade"):
            cells[meta["grade_id"]] = (float(meta.get("points", 0)), cell["cell_type"] == "code")
    return cells
