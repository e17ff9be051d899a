"""``python -m autograder classroom --to DIR`` (first ``release --to DIR``): a ready-to-push GitHub Classroom
template repository.

The template holds what students get (``assignments/``: stubs, notebook, public
tests), a student README, pinned requirements, a root ``pytest.ini``, and
``.github/workflows/classroom.yml`` in the form GitHub Classroom runs: one step
runs the public tests once (``.github/classroom/classroom_report.py``, see
:mod:`.classroom_report`) and writes one payload for
``autograding-grading-reporter`` holding every public test function, each worth
:data:`POINTS_PER_TEST` (``.github/classroom/tests.json``), so one slip costs one
test's points rather than a file's. The workflow installs what the public tests
import (``.github/classroom/requirements.txt``: no Jupyter) with pip's cache.
Classroom points are feedback: the student controls this repository; the
sandboxed ``grade`` run is the grade of record.

Everything a student reads here speaks to the student. The workflow holds no
secret and fetches nothing private: a student can edit it and print whatever
it can read, so a token (and the hidden tests it opens) would be theirs.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from ..lesson import pins
from ..lesson.assignment import Assignment
from ..lesson.cpu_limited import machine_limits, run_limited
from . import classroom_report
from .release import diff_release
from ..errors import KitError

POINTS_PER_TEST = 1
# Measured, so that a student can plan: a fresh .venv from the template's commands (files already downloaded, so
# the download comes on top) on a 2-core machine shared with other jobs (load average 15 to 160), and one run of
# the public tests (the CPU seconds it used: about its time on an idle machine, most of it importing torch).
SETUP_DOWNLOAD_MB, TORCH_DOWNLOAD_MB, SETUP_DISK_GB, SETUP_MINUTES = 290, 190, 1.3, 8
# The template's requirements: the packages the assignment lets students import (its descriptor's ``packages``),
# then the tools they work with: the public tests always; the notebook's plots and Jupyter only for a lesson with a
# notebook. A name takes the kit's own pin (pyproject.toml); Jupyter, which the kit does not use, is pinned here.
TOOLS = ("pytest",)
NOTEBOOK_TOOLS = ("matplotlib", "notebook==7.6.5", "ipykernel")
# What a lesson's student_readme.md may name in braces; any other brace (``\theta_{i}``, a JSON example) stays.
PLACEHOLDERS = ("setup", "title", "package", "steps", "total", "points_per_test", "seconds", "forbidden", "packages",
                "tests", "start_here", "schedule")
_PLACEHOLDER = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")
# What the template's other files point to in its README, found by the lesson's own section titles: a README
# without such a section gets no pointer (a lesson's README need not have the kit lesson's sections).
SECTION_TOPICS = {"grading": re.compile(r"(?i)\bgrad(e|ed|es|ing)\b"),
                  "setup": re.compile(r"(?i)\bset[- ]?up\b|\binstall")}
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$")
# What the workflow reads and runs, beside it in the template (the workflow's step names the script).
CLASSROOM_DIR = ".github/classroom"
REPORT_SCRIPT = f"{CLASSROOM_DIR}/{Path(classroom_report.__file__).name}"
PYTEST_INI = """\
[pytest]
testpaths = assignments/{package}/tests
addopts = -p no:cacheprovider
"""


@dataclass(frozen=True)
class Step:
    """One public test function in Classroom's payload, pass or fail as a whole (all of its cases)."""

    id: str  # the test's name in the reporter's payload
    test_file: str
    test: str  # the test function; it passes when all of its parametrized cases pass
    points: int
    package: str = ""

    @property
    def node(self) -> str:
        return f"assignments/{self.package}/tests/{self.test_file}::{self.test}"


def student_packages(assignment: Assignment) -> tuple[str, ...]:
    """What the template installs: the assignment's packages, then the tools (each once)."""
    tools = TOOLS + (NOTEBOOK_TOOLS if assignment.notebook else ())
    return tuple(dict.fromkeys((*assignment.contract.packages, *tools)))


def workflow_packages(assignment: Assignment) -> tuple[str, ...]:
    """What the workflow installs: the assignment's packages and the tools the public tests need (no notebook
    tools: no public test runs the notebook; tests/test_classroom_payload.py checks their imports)."""
    return tuple(dict.fromkeys((*assignment.contract.packages, *TOOLS)))


def workflow_requirements(assignment: Assignment) -> str:
    """The text of ``.github/classroom/requirements.txt``: the workflow's installs, pinned as
    ``requirements.txt`` is (its hash is also the key of the workflow's pip cache)."""
    return ("# What the Classroom workflow installs (the public tests need no Jupyter), pinned like requirements.txt.\n"
            + "".join(f"{pins.pin(name)}\n" for name in workflow_packages(assignment)))


def report_tests(steps: tuple[Step, ...]) -> str:
    """The text of ``.github/classroom/tests.json``: each public test function's payload name, node and points."""
    return json.dumps({"tests": [{"name": step.id, "node": step.node, "points": step.points} for step in steps]},
                      indent=1) + "\n"


def readme_sections(readme: str) -> list[str]:
    """The titles of the README's headings, in order (lines in fenced code blocks are not headings)."""
    titles, fenced = [], False
    for line in readme.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and (heading := _HEADING.match(line)):
            titles.append(heading.group(1))
    return titles


def readme_pointer(readme: str, topic: str) -> str | None:
    """``README.md, "Title",``: the README's first section on ``topic`` (a key of :data:`SECTION_TOPICS`), as the
    template's other files point to it; None where the lesson's README has no such section."""
    title = next((title for title in readme_sections(readme) if SECTION_TOPICS[topic].search(title)), None)
    return f'README.md, "{title}",' if title else None


def _lesson_readme(assignment: Assignment, steps: tuple[Step, ...] | None, readme: str | None) -> str:
    """The student README the pointers look into: ``readme``, else the lesson's rendered (its titles need no test
    count, so none is collected)."""
    return readme if readme is not None else student_readme(assignment, steps, tests=0)


def student_requirements(assignment: Assignment, readme: str | None = None) -> str:
    """The text of the template's ``requirements.txt``; it points to the set-up section of ``readme`` (the
    template's README, rendered from the lesson when not given) where there is one, else gives torch's command."""
    torch = pins.pin("torch")
    pointer = readme_pointer(_lesson_readme(assignment, None, readme), "setup")
    where = (f"# ({pointer} has the commands)" if pointer else
             f"# (CPU build: {pins.torch_cpu_install('python')})")
    return (f"# Pinned so that everyone computes the same numbers. Install torch first, the build for your machine\n"
            f"{where}, then this file: pip then finds {torch} already there.\n"
            + "".join(f"{name if '==' in name else pins.pin(name)}\n" for name in student_packages(assignment)))


def allowed_packages(assignment: Assignment) -> str:
    """The packages students may import, as prose: "`torch`, `numpy` and `einops`"."""
    names = [f"`{name}`" for name in assignment.contract.packages]
    return " and ".join(filter(None, (", ".join(names[:-1]), "".join(names[-1:]))))


def public_test_files(assignment: Assignment) -> list[tuple[str, str]]:
    """``[(test file, step id prefix)]``: one public test file per student file (``test_<module>.py``), in the
    order students write them; the prefix is the descriptor's ``[classroom.prefixes]`` entry or the module."""
    return [(f"test_{module}.py", assignment.step_prefixes.get(module, module))
            for module in assignment.contract.modules]


def classroom_steps(assignment: Assignment, tests_dir: Path | None = None) -> tuple[Step, ...]:
    """One :class:`Step` per public test function, in file order then source order."""
    tests_dir = Path(tests_dir or assignment.release / "tests")
    files = public_test_files(assignment)
    unplaced = sorted({path.name for path in tests_dir.glob("test_*.py")} - {name for name, _ in files})
    if unplaced:
        raise KitError(f"public test files without Classroom steps: {', '.join(unplaced)} (one test_<module>.py "
                       "per student file)")
    steps = []
    for test_file, prefix in files:
        if not (tests_dir / test_file).is_file():
            continue
        tree = ast.parse((tests_dir / test_file).read_text())
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                words = node.name.removeprefix("test_").removeprefix(f"{prefix}_")  # heads-keep-..., not heads-heads-
                steps.append(Step(f"{prefix}-{words.replace('_', '-')}", test_file, node.name, POINTS_PER_TEST,
                                  assignment.id))
    ids = [step.id for step in steps]
    if len(set(ids)) != len(ids):
        twice = sorted({step_id for step_id in ids if ids.count(step_id) > 1})
        raise KitError(f"two public tests give the same Classroom step id: {', '.join(twice)}")
    return tuple(steps)


def public_test_count(assignment: Assignment, tests_dir: Path | None = None) -> int:
    """How many tests pytest reports for the public tests (each parametrized case counts, as a student's
    ``pytest`` run shows them), collected in a child process against the release."""
    tests_dir = Path(tests_dir or assignment.release / "tests").resolve()
    # Collecting imports torch: once per process for the same files (a README is written often in the kit's tests).
    files = tuple((path.name, path.stat().st_mtime_ns, path.stat().st_size) for path in sorted(tests_dir.glob("*.py")))
    return _collected(str(tests_dir), files, assignment.package_variable, str(assignment.release.parent))


@functools.cache
def _collected(tests_dir: str, files: tuple, variable: str, package_parent: str) -> int:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", **{variable: package_parent})
    # Limited by its CPU time, not the wall clock: a crowded machine slows it, never fails it.
    done = run_limited([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                        "--rootdir", tests_dir, tests_dir], machine_limits(300), "collecting the public tests", env=env)
    found = re.search(r"^(\d+) tests? collected", done.stdout, re.M)
    if done.returncode != 0 or found is None:
        raise KitError(f"the public tests in {tests_dir} could not be collected: {done.stdout[-300:].strip()}")
    return int(found.group(1))


def _points(points: int) -> str:
    return f"{points} point{'' if points == 1 else 's'}"


def classroom_workflow(assignment: Assignment, steps: tuple[Step, ...] | None = None, readme: str | None = None
                       ) -> str:
    """The text of ``.github/workflows/classroom.yml``: install, one pytest run of the public tests (one torch
    start, where a step per test cost one each), then the reporter with that run's one payload. Its comment points
    to the grading section of ``readme`` (the template's README, rendered from the lesson when not given), if any."""
    steps = steps or classroom_steps(assignment)
    runner = classroom_report.RUNNER
    pointer = readme_pointer(_lesson_readme(assignment, steps, readme), "grading")
    relation = (f"{pointer} says how the two relate." if pointer else
                "the grade comes from your\n# instructor's own run of the grader.")
    return f"""# GitHub Classroom feedback: the public tests run once; each test function earns {_points(POINTS_PER_TEST)},
# pass or fail as a whole. These points are not your grade: {relation}
name: Autograding Tests
"on":
  push:
  repository_dispatch:
permissions:
  checks: write
  actions: read
  contents: read
jobs:
  run-autograding-tests:
    runs-on: ubuntu-latest
    if: github.actor != 'github-classroom[bot]'
    timeout-minutes: 30
    steps:
      - name: Checkout code
        uses: actions/checkout@v4
      - name: Set up Python
        uses: actions/setup-python@v5
        with:
          python-version: "3.11"
          cache: pip
          cache-dependency-path: {CLASSROOM_DIR}/requirements.txt
      - name: Install what the public tests need (CPU build of torch)
        run: |
          {pins.torch_cpu_install("python")}
          python -m pip install -r {CLASSROOM_DIR}/requirements.txt
      - name: Public tests ({len(steps)} test functions, one pytest run)
        id: {runner}
        timeout-minutes: 10
        run: python {REPORT_SCRIPT} --minutes 8
      - name: Autograding Reporter
        uses: classroom-resources/autograding-grading-reporter@v1
        env:
          {runner.upper()}_RESULTS: "${{{{steps.{runner}.outputs.result}}}}"
        with:
          runners: {runner}
"""


def _setup() -> str:
    """The README's set-up section: the pinned torch build first, then the template's requirements."""
    torch = pins.version("torch")
    return f"""## Set up

You need Python 3.11 or newer. Install torch first, the build for your machine, then the rest. No GPU is
needed: the CPU build is the small, quick choice everywhere. With it, set-up downloads about {SETUP_DOWNLOAD_MB} MB
({TORCH_DOWNLOAD_MB} MB of it torch) and takes about {SETUP_DISK_GB:g} GB of disk. Installing took {SETUP_MINUTES} minutes on a busy
2-core machine once the files were downloaded: plan for a quarter of an hour, more on a slow connection. Your
first test run takes longer than later ones (Python compiles what it imports, once).

CPU only (Linux, Windows):

```
python -m venv .venv
{pins.torch_cpu_install(".venv/bin/python")}
.venv/bin/python -m pip install -r requirements.txt
```

macOS: the same without the torch line (PyPI's macOS build has no CUDA in it).

With an NVIDIA GPU (CUDA): on Linux, the first and last lines alone install PyPI's torch {torch}, which is
the CUDA build (several GB). For another CUDA version, or on Windows, replace the torch line with
`.venv/bin/python -m pip install {pins.pin("torch")} --index-url https://download.pytorch.org/whl/<tag>`, with the
CUDA tag (`cu` and a number) that PyTorch's install selector shows for torch {torch} and your driver.

On Windows write `.venv\\Scripts\\python` for `.venv/bin/python`. Check with
`.venv/bin/python -c "import torch; print(torch.__version__, torch.cuda.is_available())"`.

"""


def _forbidden(assignment: Assignment) -> str:
    """The assignment's forbidden APIs as prose: "`a`, `b` or `c`"."""
    names = [f"`{name}`" for name in assignment.contract.forbidden]
    return " or ".join(filter(None, (", ".join(names[:-1]), "".join(names[-1:]))))


def _start_here(assignment: Assignment) -> str:
    """The README's "Start here" checklist: set up, then each student file in the descriptor's order with the
    public tests of that file alone, the notebook, and the push."""
    package = assignment.id
    items = [f"Set up (below). The code needs only pytest and the packages the grader has ({allowed_packages(assignment)}): "
             "you can start on it before the notebook's packages are installed."]
    for module, names in _names_by_module(assignment).items():
        items.append(f"Write `assignments/{package}/{module}.py` ({', '.join(f'`{name}`' for name in names)}), then "
                     f"check it alone: "
                     f"`.venv/bin/python -m pytest -k {module}`.")
    if assignment.notebook:
        items.append(f"Open `assignments/{package}/{assignment.notebook}`, run it, answer the questions and save it "
                     "(run or not, it is graded the same: the grader runs it again).")
    items.append("Commit and push: every push runs the public tests on GitHub Classroom (the template's own first "
                 "commit has no run; your first push does).")
    return "## Start here\n\n" + "\n".join(f"{number}. {item}" for number, item in enumerate(items, 1)) + "\n\n"


def _names_by_module(assignment: Assignment) -> dict[str, list[str]]:
    names: dict[str, list[str]] = {module: [] for module in assignment.contract.modules}
    for name, module in assignment.contract.names.items():
        names[module].append(name)
    return names


def _schedule(assignment: Assignment) -> str:
    """The README's grading schedule, from the descriptor's ``[classroom.schedule]`` (or the defaults)."""
    words = assignment.schedule
    return (f"**When.** {words['grading']} **What counts.** {words['submission']} **Feedback.** "
            f"{words['feedback']}")


def student_readme(assignment: Assignment, steps: tuple[Step, ...] | None = None, tests: int | None = None) -> str:
    """The template's README.md: the lesson's own text (``student_readme.md`` in its folder, with the set-up
    commands, the forbidden APIs, the number of public tests as pytest reports them (``tests``, collected when
    not given), of test functions (Classroom steps) and their points filled in), or a plain page without one."""
    steps = steps or classroom_steps(assignment)
    total = sum(step.points for step in steps)
    template = assignment.folder / "student_readme.md"
    text = template.read_text(encoding="utf-8") if template.is_file() else (
        "# {title}\n\n{setup}## Check your work\n\n```\n.venv/bin/python -m pytest\n```\n")
    seconds = assignment.public_test_seconds
    fields = dict(setup=_setup(), title=assignment.title, package=assignment.id, steps=len(steps), total=total,
                  points_per_test=_points(POINTS_PER_TEST),
                  seconds=f"about {seconds:g} seconds" if seconds else "a few seconds",
                  forbidden=_forbidden(assignment), packages=allowed_packages(assignment),
                  start_here=_start_here(assignment), schedule=_schedule(assignment))
    if "{tests}" in text:  # collecting costs a torch import: only when the text asks for the count
        fields["tests"] = public_test_count(assignment) if tests is None else tests
    # Only the named placeholders are filled, once, left to right: a brace in the lesson's text is its own.
    return _PLACEHOLDER.sub(lambda found: str(fields[found.group(1)]), text)


def write_template(destination: str | Path, assignment: Assignment) -> list[str]:
    """Write ``assignment``'s template repository into ``destination`` (which must not exist or be empty)."""
    destination = Path(destination)
    if destination.exists() and any(destination.iterdir()):
        raise KitError(f"--to folder is not empty: {destination}")
    problems = diff_release(assignment.solutions, assignment.release)
    if problems:
        raise KitError(f"{assignment.release} is not what {assignment.solutions} generates; "
                       "run 'python -m autograder release' first")
    # Every text first: a lesson's mistake (an unreadable README, a public test without a step) stops here,
    # before anything is written, so the rerun after the fix finds the folder as it was.
    steps = classroom_steps(assignment)
    readme = student_readme(assignment, steps)
    texts = {"README.md": readme, "requirements.txt": student_requirements(assignment, readme),
             "pytest.ini": PYTEST_INI.format(package=assignment.id),
             ".gitignore": ".venv/\n__pycache__/\n.ipynb_checkpoints/\n",
             ".github/workflows/classroom.yml": classroom_workflow(assignment, steps, readme),
             f"{CLASSROOM_DIR}/requirements.txt": workflow_requirements(assignment),
             f"{CLASSROOM_DIR}/tests.json": report_tests(steps),
             REPORT_SCRIPT: Path(classroom_report.__file__).read_text(encoding="utf-8")}
    shutil.copytree(assignment.release, destination / "assignments" / assignment.id,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints"))
    for name, text in texts.items():
        (destination / name).parent.mkdir(parents=True, exist_ok=True)
        (destination / name).write_text(text)
    return sorted(path.relative_to(destination).as_posix() for path in destination.rglob("*") if path.is_file())
