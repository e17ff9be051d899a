"""Gradescope: ``python -m autograder gradescope --to autograder.zip`` and the ``run_autograder`` inside it.

The zip holds this kit (engine, hidden tests, reference, release), ``setup.sh``
(pinned environment and bubblewrap) and ``run_autograder``, which grades
``/autograder/submission`` with the same sandboxed judge as ``grade`` and
writes ``/autograder/results/results.json`` (the same result record, with a
visibility per test). ``AUTOGRADER_ROOT`` and ``AUTOGRADER_PYTHON`` let the
kit's tests run it against a simulated tree.
"""

from __future__ import annotations

import shlex
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from . import paths, pins
from .assignment import Assignment, resolve
from .errors import KitError
from .grading import grade_class
from .results import SubmissionResult, save
from .submission import read_submission

KIT_PARTS = ("pyproject.toml", "README.md", "nbgrader_config.py", "autograder", "solutions", "assignments")


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


def build_package(destination: str | Path, assignment: Assignment | None = None) -> Path:
    """Write the Gradescope autograder zip for ``assignment`` (the kit's lesson by default; its folders must be
    inside the kit's, where the zip keeps their places); return its path."""
    destination = Path(destination)
    if destination.suffix != ".zip":
        raise KitError(f"--to must name a .zip file, got {destination}")
    assignment = resolve(assignment)
    parts = [paths.REPO_ROOT / part for part in KIT_PARTS]
    for folder in (assignment.folder, assignment.solutions, assignment.release):
        if not folder.is_relative_to(paths.REPO_ROOT):
            raise KitError(f"the Gradescope zip packs the kit's folder; {folder} is outside it")
        if not any(folder.is_relative_to(part) for part in parts):
            parts.append(folder)
    descriptor = assignment.descriptor.relative_to(paths.REPO_ROOT).as_posix()
    destination.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(destination, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in (("setup.sh", setup_script(assignment)),
                           ("run_autograder", RUN.replace("{descriptor}", shlex.quote(descriptor)))):
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o755 << 16
            archive.writestr(info, text)
        for source in parts:
            files = [source] if source.is_file() else sorted(source.rglob("*"))
            for path in files:
                if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                    archive.write(path, path.relative_to(paths.REPO_ROOT).as_posix())
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
