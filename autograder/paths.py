"""Where the kit's folders are, relative to this package (no global state beyond constants)."""

from pathlib import Path

from .worker.contract import MODULES

REPO_ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS_DIR = REPO_ROOT / "solutions"
ASSIGNMENTS_DIR = REPO_ROOT / "assignments"
ASSIGNMENT_ID = "mha_pe"
# The three files students write; the rest of the package is given to them.
STUDENT_MODULES = tuple(f"{module}.py" for module in MODULES)
