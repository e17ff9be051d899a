"""``python -m autograder release --to DIR``: a ready-to-push GitHub Classroom template repository.

The template holds what students get (``assignments/``: stubs, notebook, public
tests), a student README, pinned requirements, a root ``pytest.ini``, and
``.github/workflows/classroom.yml`` in the form GitHub Classroom runs: one
``autograding-command-grader`` step per public test file, each worth points,
then the ``autograding-grading-reporter`` step with every step's result in
its environment. Classroom points are feedback: the student controls this
repository; the sandboxed ``grade`` run is the grade of record.
"""

import shutil
from pathlib import Path

from . import paths
from .release import diff_release
from .errors import KitError

# (step id, test file, points): the public checks Classroom runs on every push.
CLASSROOM_STEPS = (
    ("positional-encoding", "test_positional_encoding.py", 10),
    ("heads", "test_heads.py", 10),
    ("attention", "test_attention.py", 10),
)
STUDENT_REQUIREMENTS = """\
# Pinned so that everyone computes the same numbers. On a machine without a GPU, install the CPU build of
# torch first (the command for torch==2.13.0 from PyTorch's install selector), then this file.
torch==2.13.0
numpy==2.4.6
matplotlib==3.11.2
pytest==9.2.0
notebook==7.6.5
ipykernel==7.4.0
"""
PYTEST_INI = """\
[pytest]
testpaths = assignments/mha_pe/tests
addopts = -p no:cacheprovider
"""


def classroom_workflow():
    """The text of ``.github/workflows/classroom.yml``."""
    steps = []
    for step_id, test_file, points in CLASSROOM_STEPS:
        steps.append(f"""      - name: Public tests, {test_file}
        id: {step_id}
        uses: classroom-resources/autograding-command-grader@v1
        with:
          test-name: {step_id}
          setup-command: ""
          command: python -m pytest -q assignments/mha_pe/tests/{test_file}
          timeout: 10
          max-score: {points}
""")
    env = "\n".join(f"          {step_id.upper()}_RESULTS: \"${{{{steps.{step_id}.outputs.result}}}}\""
                    for step_id, _, _ in CLASSROOM_STEPS)
    runners = ",".join(step_id for step_id, _, _ in CLASSROOM_STEPS)
    return f"""# GitHub Classroom autograding: the public tests, as feedback on every push.
# The grade of record comes from the instructor's sandboxed run (python -m autograder grade).
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
    env:
      # Optional, off by default: owner/name of a private repository whose run.sh runs the instructor's hidden
      # tests. Set it here, add a secret HIDDEN_TESTS_TOKEN that can read that repository, and add
      # "hidden-tests" to the reporter's runners below.
      HIDDEN_TESTS_REPOSITORY: ""
    steps:
      - name: Checkout code
        uses: actions/checkout@v4
      - name: Set up Python
        uses: actions/setup-python@v5
        with:
          python-version: "3.11"
      - name: Install the pinned requirements (CPU build of torch)
        run: |
          python -m pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
          python -m pip install -r requirements.txt
      - name: Fetch hidden tests (optional)
        if: env.HIDDEN_TESTS_REPOSITORY != ''
        uses: actions/checkout@v4
        with:
          repository: ${{{{ env.HIDDEN_TESTS_REPOSITORY }}}}
          token: ${{{{ secrets.HIDDEN_TESTS_TOKEN }}}}
          path: .hidden-tests
      - name: Hidden tests (optional)
        id: hidden-tests
        if: env.HIDDEN_TESTS_REPOSITORY != ''
        uses: classroom-resources/autograding-command-grader@v1
        with:
          test-name: hidden-tests
          setup-command: ""
          command: bash .hidden-tests/run.sh
          timeout: 20
          max-score: 0
{"".join(steps)}      - name: Autograding Reporter
        uses: classroom-resources/autograding-grading-reporter@v1
        env:
{env}
        with:
          runners: {runners}
"""


def student_readme():
    points = sum(points for _, _, points in CLASSROOM_STEPS)
    return f"""# Multi-Head Attention and Positional Encoding

You will build, in PyTorch, the pieces the lesson describes: the sinusoidal positional encoding (and the
matrix that shifts it), splitting a projected vector into attention heads and gluing them back, and
multi-head self-attention itself. Then you answer the lesson's Check Your Understanding questions in a
notebook.

## Set up

```
python -m venv .venv
.venv/bin/python -m pip install -r requirements.txt     # see the note at the top of the file for CPU-only torch
```

## What to implement

In `assignments/mha_pe/`, in this order (each file's docstrings give the shapes, the behaviour and the errors):

1. `positional_encoding.py`: `get_positional_encoding`, `shift_matrix`, `PositionalEncoding`
2. `heads.py`: `split_heads`, `combine_heads`
3. `attention.py`: `scaled_dot_product_attention`, `MultiHeadAttention` (without `nn.MultiheadAttention` or
   `F.scaled_dot_product_attention`: building them is the point)

Replace each `raise NotImplementedError(...)` with your code. Then open
`assignments/mha_pe/check_your_understanding.ipynb` (`.venv/bin/jupyter notebook`), run the experiments with
your modules, and answer the six questions.

## Check your work

```
.venv/bin/python -m pytest            # all public tests
.venv/bin/python -m pytest -k heads   # just some
```

Each failing test says which idea it checks. Every push runs the same tests on GitHub Classroom
({points} points of feedback).

## How you are graded

Your instructor grades every submission with hidden tests in a sandbox: more sizes and edge cases, the
shift identity, agreement with PyTorch's own multi-head attention, masks, gradients, devices, speed of the
encoding table, and the notebook (its code cells automatically, its written answers by hand). The public
tests are a subset: passing them all is a good sign, not a guarantee. Your feedback names the concept
behind each check you miss.
"""


def write_template(destination):
    """Write the template repository into ``destination`` (which must not exist or be empty)."""
    destination = Path(destination)
    if destination.exists() and any(destination.iterdir()):
        raise KitError(f"--to folder is not empty: {destination}")
    problems = diff_release(paths.SOLUTIONS_DIR / paths.ASSIGNMENT_ID, paths.ASSIGNMENTS_DIR / paths.ASSIGNMENT_ID)
    if problems:
        raise KitError("assignments/ is not what solutions/ generates; run 'python -m autograder release' first")
    shutil.copytree(paths.ASSIGNMENTS_DIR / paths.ASSIGNMENT_ID, destination / "assignments" / paths.ASSIGNMENT_ID,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints"))
    (destination / "README.md").write_text(student_readme())
    (destination / "requirements.txt").write_text(STUDENT_REQUIREMENTS)
    (destination / "pytest.ini").write_text(PYTEST_INI)
    (destination / ".gitignore").write_text(".venv/\n__pycache__/\n.ipynb_checkpoints/\n")
    workflow = destination / ".github" / "workflows" / "classroom.yml"
    workflow.parent.mkdir(parents=True)
    workflow.write_text(classroom_workflow())
    return sorted(path.relative_to(destination).as_posix() for path in destination.rglob("*") if path.is_file())
