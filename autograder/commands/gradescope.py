"""Gradescope: ``python -m autograder gradescope --to autograder.zip`` and the ``run_autograder`` inside it.

The zip holds this kit's engine and one lesson (its descriptor's folder, hidden tests, reference, release: no
other lesson's files, wherever the lesson lives), ``setup.sh``
(pinned environment and bubblewrap) and ``run_autograder``, which grades
``/autograder/submission`` with the same sandboxed judge as ``grade`` and
writes ``/autograder/results/results.json`` (the same result record, with a
visibility per test). ``AUTOGRADER_ROOT`` and ``AUTOGRADER_PYTHON`` let the
kit's tests run it against a simulated tree.
"""

from __future__ import annotations

import os
import shlex
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
from .grading import grade_class
from ..records.results import SubmissionResult, save
from ..intake.submission import read_submission

KIT_FILES = ("pyproject.toml", "README.md", "nbgrader_config.py")
ENGINE = "autograder"
LESSON_PREFIX = "lesson"  # where a lesson from outside the kit's folder sits in the zip


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
        for name, text in (("setup.sh", setup_script(assignment)),
                           ("run_autograder", RUN.replace("{descriptor}", shlex.quote(descriptor)))):
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o755 << 16
            archive.writestr(info, text)
        for name, path in sorted(packed.items()):
            archive.write(path, name)
    return destination


def run(root: str | Path, emit: Callable[[str], None] = print, sandbox_mode: str = "isolated",
        assignment: Assignment | None = None) -> SubmissionResult:
    """Grade ``ROOT/submission`` as one student and write ``ROOT/results/results.json``.

    Isolation is required (bubblewrap, or the confined mode where Gradescope's container refuses user
    namespaces): without it this fails loudly instead of grading unisolated.
    """
    started = time.monotonic()
    root = Path(root)
    submission = root / "submission"
    if not submission.is_dir():
        raise KitError(f"no submission folder at {submission}")
    assignment = resolve(assignment)
    with tempfile.TemporaryDirectory(prefix="gradescope-") as tmp:
        student = Path(tmp) / "class" / "submission"
        student.mkdir(parents=True)
        # Only what intake accepts is copied (no links, devices or oversized files); what it refused is
        # staged as absent and graded as such.
        intake = read_submission(submission, assignment.contract, assignment.notebook)
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
    result = replace(results[0], intake_problems={**results[0].intake_problems, **refused},
                     execution_time=time.monotonic() - started)
    save(result, root / "results" / "results.json")
    emit(f"results.json: {result.score:g} / {result.max_score:g}")
    return result
