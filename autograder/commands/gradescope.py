"""Gradescope: ``python -m autograder gradescope --to autograder.zip`` and the ``run_autograder`` inside it.

The zip holds this kit's engine and one lesson (its descriptor's folder, hidden tests, reference, release: no
other lesson's files, wherever the lesson lives), the lesson's README as ``README.md`` (never the kit's),
``setup.sh`` (pinned environment and bubblewrap) and ``run_autograder``, which grades
``/autograder/submission`` with the same sandboxed judge as ``grade`` and
writes ``/autograder/results/results.json`` (the same result record, with a
visibility per test). ``AUTOGRADER_ROOT`` and ``AUTOGRADER_PYTHON`` let the
kit's tests run it against a simulated tree.
"""

from __future__ import annotations

import os
import shlex
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from .. import paths
from ..lesson import pins
from ..lesson.assignment import Assignment, resolve
from ..errors import KitError
from .classroom import student_readme
from .grading import grade_class
from ..records.results import GraderFailure, SubmissionResult, record_text, save, valid_result, write_atomic
from .judge_loop import grader_error
from ..intake.stubs import stub_files
from ..intake.submission import read_submission

KIT_FILES = ("pyproject.toml", "nbgrader_config.py")  # README.md is the lesson's: see lesson_readme
ENGINE = "autograder"
LESSON_PREFIX = "lesson"  # where a lesson from outside the kit's folder sits in the zip
STUDENT = "submission"  # the one student a Gradescope run grades


def setup_script(assignment: Assignment) -> str:
    """``setup.sh``: the pins are written in when the zip is built, so the image gets the kit's own; it ends by
    importing every package the assignment lets students import (pyproject.toml pins each), so an image that
    lacks one fails when it is built, not when a student's import fails."""
    return f"""\
#!/usr/bin/env bash
# Gradescope runs this once, when the autograder image is built (choose the Ubuntu 24.04 base image).
set -euo pipefail
apt-get update
DEBIAN_FRONTEND=noninteractive apt-get install -y bubblewrap python3 python3-venv python3-pip
cd /autograder/source
python3 -m venv .venv
{pins.torch_cpu_install(".venv/bin/python")}
.venv/bin/python -m pip install -e .
.venv/bin/python -c "import {', '.join(assignment.contract.packages)}"
"""


RUN = """\
#!/usr/bin/env bash
# Gradescope runs this for every submission: the kit's sandboxed judge grades /autograder/submission.
set -euo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
PYTHON="${AUTOGRADER_PYTHON:-$ROOT/source/.venv/bin/python}"
cd "$ROOT/source"
exec "$PYTHON" -m autograder gradescope-run --root "$ROOT" --assignment {descriptor}
"""


def lesson_readme(assignment: Assignment) -> str:
    """The zip's ``README.md`` (pyproject.toml's readme, so ``pip install`` needs one): the lesson folder's own
    ``README.md``, else its student README as the Classroom template shows it (raw, where the lesson is not one
    Classroom can take)."""
    own = assignment.folder / "README.md"
    if own.is_file():
        return own.read_text(encoding="utf-8")
    try:
        return student_readme(assignment)
    except KitError:
        template = assignment.folder / "student_readme.md"
        return template.read_text(encoding="utf-8") if template.is_file() else f"# {assignment.title}\n"


def lesson_parts(assignment: Assignment) -> list[Path]:
    """The files and folders of ``assignment`` the zip needs: its descriptor's folder and every place the descriptor
    names (each once, the outermost)."""
    places = [assignment.folder, assignment.solutions, assignment.release, assignment.hidden_tests,
              assignment.catalogue, assignment.warm_up, assignment.hooks, assignment.promises]
    places = sorted({Path(place) for place in places if place is not None and Path(place).exists()}, key=str)
    return [place for place in places if not any(place != other and place.is_relative_to(other) for other in places)]


def _zip_names(assignment: Assignment) -> tuple[dict[Path, str], str]:
    """``({each lesson part: its name in the zip}, the descriptor's name in the zip)``. A lesson inside the kit's
    folder keeps its places there; one outside goes under :data:`LESSON_PREFIX`, its parts where they sit relative
    to one another, so the descriptor's relative paths still hold."""
    parts = lesson_parts(assignment)
    if all(part.is_relative_to(paths.REPO_ROOT) for part in parts):
        base, prefix = paths.REPO_ROOT, ""
    else:
        base, prefix = Path(os.path.commonpath([str(part) for part in parts])), f"{LESSON_PREFIX}/"
    names = {part: prefix + part.relative_to(base).as_posix() for part in parts}
    return names, prefix + assignment.descriptor.relative_to(base).as_posix()


def _files(source: Path) -> list[Path]:
    found = [source] if source.is_file() else sorted(source.rglob("*"))
    return [path for path in found if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
            and ".ipynb_checkpoints" not in path.parts]


def build_package(destination: str | Path, assignment: Assignment | None = None) -> Path:
    """Write the Gradescope autograder zip for ``assignment`` (the kit's lesson by default), from wherever it
    lives: the engine (``autograder/``, no lesson of its own but this one), the kit's project files and this
    lesson's parts; return its path."""
    destination = Path(destination)
    if destination.suffix != ".zip":
        raise KitError(f"--to must name a .zip file, got {destination}")
    assignment = resolve(assignment)
    lessons = paths.REPO_ROOT / ENGINE / "lessons"
    names, descriptor = _zip_names(assignment)
    packed: dict[str, Path] = {}
    for name in KIT_FILES:
        packed[name] = paths.REPO_ROOT / name
    for path in _files(paths.REPO_ROOT / ENGINE):
        if not path.is_relative_to(lessons) or path == lessons / "__init__.py":  # of the kit's lessons, this one
            packed[path.relative_to(paths.REPO_ROOT).as_posix()] = path
    for part, name in names.items():
        for path in _files(part):
            packed[(name + "/" + path.relative_to(part).as_posix()) if part.is_dir() else name] = path
    destination.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(destination, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("README.md", lesson_readme(assignment))
        for name, text in (("setup.sh", setup_script(assignment)),
                           ("run_autograder", RUN.replace("{descriptor}", shlex.quote(descriptor)))):
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o755 << 16
            archive.writestr(info, text)
        for name, path in sorted(packed.items()):
            archive.write(path, name)
    return destination


def run(root: str | Path, emit: Callable[[str], None] = print, sandbox_mode: str = "isolated",
        assignment: Assignment | str | Path | None = None) -> SubmissionResult:
    """Grade ``ROOT/submission`` as one student and write ``ROOT/results/results.json``; never raises.

    Isolation is required (bubblewrap, or the confined mode where Gradescope's container refuses user
    namespaces): without it this grades nothing. Whatever stops the grading (no isolation, no submission folder,
    a broken lesson, the grader's own exception) is written as a failed grading (``grader_error``: no tests, the
    reason in its output) and said on stderr: Gradescope always gets a results.json, and ``gradescope-run`` exits
    0 after writing it (an autograder that exits otherwise shows students nothing at all).
    """
    started = time.monotonic()
    path = Path(root) / "results" / "results.json"
    try:
        result = _graded(Path(root), emit, sandbox_mode, resolve(assignment), started)
    except Exception as error:  # noqa: BLE001 - see above: the failure is the record
        reason = str(error) if isinstance(error, KitError) else grader_error(error)
        print(f"error: grading failed: {reason}", file=sys.stderr)
        note = f"grading failed: {reason}"
        result = SubmissionResult(student=STUDENT, output=note, notes=(note,), grader_failures=(
            GraderFailure("grader_error", reason),), execution_time=time.monotonic() - started)
    try:
        result = valid_result(result)
        save(result, path)
    except Exception as error:  # noqa: BLE001 - unsealed, as a last resort: Gradescope reads it all the same
        print(f"error: results.json could not be sealed and written ({grader_error(error)})", file=sys.stderr)
        note = f"grading failed: the record could not be written ({grader_error(error)})"
        result = SubmissionResult(student=STUDENT, output=note, notes=(note,), execution_time=result.execution_time,
                                  grader_failures=(GraderFailure("record_failed", grader_error(error)),))
        try:
            write_atomic(path, record_text(result.to_json()))
        except OSError as error:
            print(f"error: results.json could not be written ({os.strerror(error.errno or 0)})", file=sys.stderr)
    emit(f"results.json: {result.score:g} / {result.max_score:g}")
    return result


def _graded(root: Path, emit: Callable[[str], None], sandbox_mode: str, assignment: Assignment, started: float
            ) -> SubmissionResult:
    """The graded record of ``root/submission`` (raises where it cannot be graded)."""
    submission = root / "submission"
    if not submission.is_dir():
        raise KitError(f"no submission folder at {submission}")
    with tempfile.TemporaryDirectory(prefix="gradescope-") as tmp:
        student = Path(tmp) / "class" / STUDENT
        student.mkdir(parents=True)
        # Only what intake accepts is copied (no links, devices or oversized files); what it refused is
        # staged as absent and graded as such.
        intake = read_submission(submission, assignment.contract, assignment.notebook,
                                 stub_files(assignment.release, assignment.contract.modules))
        for module, data in intake.files.items():
            (student / f"{module}.py").write_bytes(data)
        if intake.notebook is not None:
            (student / assignment.notebook).write_bytes(intake.notebook)
        # A code-only Gradescope assignment has no notebook: grade the notebook only when one was handed in.
        results = grade_class(student.parent, Path(tmp) / "out", jobs=1, emit=emit, sandbox_mode=sandbox_mode,
                              skip_notebook=intake.notebook is None, assignment=assignment)
        if intake.notes():
            results = [replace(results[0], notes=results[0].notes + tuple(intake.notes()),
                               output="\n".join(filter(None, [results[0].output, *intake.notes()])))]
    # What intake refused was staged as absent: the record names the refusal, not "missing". The submission is the
    # whole run here, so its time is the run's (start-up included), as Gradescope shows it.
    refused = {what: why for what, why in intake.problems.items() if why != "missing"}
    return replace(results[0], intake_problems={**results[0].intake_problems, **refused},
                   execution_time=time.monotonic() - started)
