"""The Check Your Understanding notebook, through the real nbgrader: release it, autograde it, read its grades.

nbgrader runs in a child process (``python -m nbgrader``, with the environment's
``bin/`` on PATH, since it calls ``alembic``). Grading uses a course folder
``OUT_DIR/nbgrader`` that stays after the run, so the instructor can open it in
formgrader to grade the written answers; ``python -m autograder gradebook``
then reads the final scores back from its database.

Each notebook's kernel is started through :mod:`autograder.kernel_sandbox`,
which runs it inside the same bwrap sandbox as the code workers, network
namespace included: its channels to nbgrader are Unix sockets (jupyter's
``ipc`` transport), see docs/security.md.
"""

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import paths
from .errors import KitError
from .submission import NOTEBOOK, nbgrader_safe_name

SOURCE_NOTEBOOK = paths.SOLUTIONS_DIR / paths.ASSIGNMENT_ID / NOTEBOOK
COURSE_CONFIG = """\
# Written by python -m autograder grade: this folder is an nbgrader course for the notebook's grading.
# Open it with formgrader to grade the written answers, then run: python -m autograder gradebook OUT_DIR
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


@dataclass(frozen=True)
class CellGrade:
    """One graded cell of a student's notebook."""

    grade_id: str
    autograded: bool
    score: float
    max_score: float
    pending: bool  # a written answer not graded yet


@dataclass(frozen=True)
class NotebookGrade:
    """The notebook part of one student's grade; ``reason`` says why it is empty."""

    student: str
    cells: tuple = ()
    reason: str = ""


def _kernel_spec(course_dir, sandbox_mode, limits_json):
    """A ``python3`` kernelspec (first on JUPYTER_PATH) that starts each kernel through the kernel sandbox."""
    data = Path(course_dir) / ".kernels"
    spec = data / "kernels" / "python3"
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "autograder.kernel_sandbox", sandbox_mode, "{connection_file}"],
        "display_name": "Python 3 (grading sandbox)",
        "language": "python",
        "env": {"GRADER_KERNEL_LIMITS": limits_json},
    }, indent=1))
    return data


def autograde(course_dir, submissions, sandbox, timeout=60, sandboxed_kernel=True):
    """Autograde every student's notebook with nbgrader; return ``{student: NotebookGrade}``.

    ``submissions`` maps student id to ``(notebook bytes or None, {module: bytes})``, both as intake read them;
    the module files go next to the notebook so its experiments can import the student's own package.
    """
    from dataclasses import asdict

    course = _write_course(course_dir, timeout)
    grades, ids = {}, {}
    for student, (notebook, files) in submissions.items():
        if notebook is None:
            grades[student] = NotebookGrade(student, reason=f"no {NOTEBOOK} in the submission")
            continue
        nbid = nbgrader_id(student)
        ids[student] = nbid
        target = course / "submitted" / nbid / paths.ASSIGNMENT_ID
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        (target / NOTEBOOK).write_bytes(notebook)
        shutil.copyfile(paths.ASSIGNMENTS_DIR / paths.ASSIGNMENT_ID / "__init__.py", target / "__init__.py")
        for module, data in files.items():
            (target / f"{module}.py").write_bytes(data)
        os.chmod(course / "submitted" / nbid, 0o755)
    if ids:
        run_nbgrader(["generate_assignment", paths.ASSIGNMENT_ID, "--force"], course)  # the cells to grade, in the db
        with tempfile.TemporaryDirectory(prefix="mha-pe-kernels-") as runtime:
            env, options = {"PYTHONPATH": str(paths.REPO_ROOT), "JUPYTER_RUNTIME_DIR": runtime}, []
            if sandboxed_kernel:  # (the benchmark turns it off to time nbgrader's own kernel start)
                env["JUPYTER_PATH"] = str(_kernel_spec(course, sandbox.mode, json.dumps(asdict(sandbox.limits))))
                # Unix-socket channels: the kernel needs no network, so its sandbox has none. Their path must be
                # absolute: nbgrader and the kernel's launcher run in different folders.
                options = ["--KernelManager.transport=ipc", f"--KernelManager.ip={runtime}/kernel"]
            run_nbgrader(["autograde", paths.ASSIGNMENT_ID, "--create", "--force", *options], course,
                         timeout=max(600, 30 * len(ids) * timeout), extra_env=env)
    grades.update(read_grades(course, ids))
    return grades


def read_grades(course_dir, ids):
    """``{student: NotebookGrade}`` from the course database, for the nbgrader ids ``ids`` (student -> id)."""
    from nbgrader.api import Gradebook, MissingEntry

    grades = {}
    db = f"sqlite:///{Path(course_dir).resolve() / 'gradebook.db'}"
    with Gradebook(db) as gradebook:
        for student, nbid in ids.items():
            try:
                notebook = gradebook.find_submission_notebook(NOTEBOOK[:-6], paths.ASSIGNMENT_ID, nbid)
            except MissingEntry:
                grades[student] = NotebookGrade(student, reason="nbgrader did not grade this notebook")
                continue
            cells = []
            for grade in sorted(notebook.grades, key=lambda g: g.name):
                autograded = grade.cell.cell_type == "code"
                # A written answer stays pending until someone gives it a manual score in formgrader
                # (nbgrader scores an untouched answer 0 on its own; the instructor still confirms it).
                pending = not autograded and grade.manual_score is None
                cells.append(CellGrade(grade.name, autograded, float(grade.score or 0), float(grade.max_score),
                                       pending))
            grades[student] = NotebookGrade(student, tuple(cells))
    return grades


def notebook_tests(grade, max_points_by_cell):
    """The notebook's autograded cells as TestResults (group ``notebook``) for one student's result."""
    from .results import TestResult

    tests = []
    for grade_id, (points, autograded) in sorted(max_points_by_cell.items()):
        if not autograded:
            continue
        cell = next((c for c in grade.cells if c.grade_id == grade_id), None)
        if cell is None:
            tests.append(TestResult(f"notebook: {grade_id}", "notebook", 0, points, "failed",
                                    grade.reason or "this cell was not graded", "visible", f"notebook::{grade_id}"))
        else:
            passed = cell.score >= cell.max_score
            tests.append(TestResult(f"notebook: {grade_id}", "notebook", cell.score, cell.max_score,
                                    "passed" if passed else "failed",
                                    "" if passed else "The notebook's check for this answer did not pass.",
                                    "visible", f"notebook::{grade_id}"))
    return tests


def source_cells():
    """``{grade_id: (points, autograded)}`` of the source notebook's graded cells."""
    notebook = json.loads(SOURCE_NOTEBOOK.read_text())
    cells = {}
    for cell in notebook["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade"):
            cells[meta["grade_id"]] = (float(meta.get("points", 0)), cell["cell_type"] == "code")
    return cells
