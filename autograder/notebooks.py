"""The Check Your Understanding notebook through nbgrader's own commands: release it, and (for the bench's
comparison only) autograde a class with nbgrader's own kernels.

Grading itself no longer runs nbgrader's executor: see :mod:`autograder.notebook_stage` (the worker runs the
cells, the judge runs the checks) and :mod:`autograder.nbgrader_record` (nbgrader's course and database).
nbgrader runs in a child process (``python -m nbgrader``, with the environment's ``bin/`` on PATH, since it
calls ``alembic``).
"""

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from . import paths
from .errors import KitError
from .submission import NOTEBOOK, nbgrader_safe_name

SOURCE_NOTEBOOK = paths.SOLUTIONS_DIR / paths.ASSIGNMENT_ID / NOTEBOOK
COURSE_CONFIG = """\
# Written by python -m autograder grade: this folder is an nbgrader course for the notebook's grading.
# Open it with formgrader to grade the written answers, then run: python -m autograder final-gradebook OUT_DIR
c = get_config()
c.CourseDirectory.root = {root!r}
c.CourseDirectory.course_id = "mha_pe"
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


def run_nbgrader(args, course_dir, timeout=600, extra_env=None):
    """Run ``nbgrader ARGS`` in ``course_dir``; raise KitError (with nbgrader's last line) when it fails."""
    done = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course_dir, env=_environment(extra_env),
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise KitError(f"nbgrader {args[0]} failed: {last[:300]}")
    return done


def _write_course(course_dir, timeout=60):
    course_dir = Path(course_dir).resolve()
    (course_dir / "source" / paths.ASSIGNMENT_ID).mkdir(parents=True, exist_ok=True)
    db = f"sqlite:///{course_dir / 'gradebook.db'}"
    (course_dir / "nbgrader_config.py").write_text(COURSE_CONFIG.format(root=str(course_dir), db=db, timeout=timeout))
    shutil.copyfile(SOURCE_NOTEBOOK, course_dir / "source" / paths.ASSIGNMENT_ID / NOTEBOOK)
    return course_dir


def release_notebook(source=SOURCE_NOTEBOOK):
    """The student version of the source notebook, as ``nbgrader generate_assignment`` writes it (bytes)."""
    return _release_notebook(Path(source).read_bytes())


@functools.lru_cache(maxsize=4)
def _release_notebook(source_bytes):
    # A pure function of the source's bytes, so one process runs nbgrader once per version of the notebook.
    with tempfile.TemporaryDirectory(prefix="mha-pe-nbgrader-") as tmp:
        course = _write_course(tmp)
        (course / "source" / paths.ASSIGNMENT_ID / NOTEBOOK).write_bytes(source_bytes)
        run_nbgrader(["generate_assignment", paths.ASSIGNMENT_ID, "--force"], course)
        return (course / "release" / paths.ASSIGNMENT_ID / NOTEBOOK).read_bytes()


def nbgrader_id(student):
    """The student's id inside nbgrader (folder names and database keys): injective and length-bounded."""
    return nbgrader_safe_name(student)


def autograde(course_dir, submissions, timeout=60):
    """nbgrader's own ``autograde`` of ``{student: notebook bytes}`` in ``course_dir`` (kernels unsandboxed):
    the bench's yardstick for the notebook stage. Returns nothing; nbgrader's database holds the scores."""
    course = _write_course(course_dir, timeout)
    for student, notebook in submissions.items():
        target = course / "submitted" / nbgrader_id(student) / paths.ASSIGNMENT_ID
        target.mkdir(parents=True, exist_ok=True)
        (target / NOTEBOOK).write_bytes(notebook)
    run_nbgrader(["generate_assignment", paths.ASSIGNMENT_ID, "--force"], course)
    run_nbgrader(["autograde", paths.ASSIGNMENT_ID, "--create", "--force"], course,
                 timeout=max(600, 30 * len(submissions) * timeout), extra_env={"PYTHONPATH": str(paths.REPO_ROOT)})


def source_cells():
    """``{grade_id: (points, autograded)}`` of the source notebook's graded cells."""
    notebook = json.loads(SOURCE_NOTEBOOK.read_text())
    cells = {}
    for cell in notebook["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade"):
            cells[meta["grade_id"]] = (float(meta.get("points", 0)), cell["cell_type"] == "code")
    return cells
