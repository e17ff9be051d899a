"""The assignment's points, computed from their sources so that no test types a total.

The code's points come from the collected hidden suite, the notebook's from the source notebook's nbgrader cell
metadata. When either changes, every test follows.
"""

import json
from dataclasses import dataclass
from functools import cache

from autograder.judge.hidden_suite import HiddenSuite
from lesson import LESSON


def points(entry) -> float:
    """A rubric entry's points."""
    return entry.points


def optional(entry) -> bool:
    """Whether a rubric entry counts only where it can run (the GPU check: with CUDA)."""
    return entry.optional


@cache
def hidden_entries() -> tuple:
    """The rubric entries of every collected hidden test."""
    suite = HiddenSuite.collect(LESSON.hidden_tests)
    assert suite.problems == (), suite.problems
    return tuple(case.entry for case in suite.cases)


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def code_max(cuda: bool | None = None) -> float:
    """The code's maximum; an optional check counts only with CUDA (``None``: whether this machine has it)."""
    cuda = cuda_available() if cuda is None else cuda
    return sum(points(entry) for entry in hidden_entries() if cuda or not optional(entry))


@dataclass(frozen=True)
class NotebookPoints:
    """The source notebook's graded cells, ``{grade_id: points}``: autograded checks and written answers."""

    checks: dict
    written: dict

    @property
    def auto(self) -> float:
        return sum(self.checks.values())

    @property
    def manual(self) -> float:
        return sum(self.written.values())

    @property
    def total(self) -> float:
        return self.auto + self.manual


@cache
def notebook() -> NotebookPoints:
    """Read from nbgrader's metadata: a graded code cell without a solution is a check, a graded solution an answer."""
    checks, written = {}, {}
    for cell in json.loads(LESSON.source_notebook().read_text())["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        if not meta.get("grade"):
            continue
        if meta.get("solution"):
            written[meta["grade_id"]] = meta["points"]
        elif cell["cell_type"] == "code":
            checks[meta["grade_id"]] = meta["points"]
    return NotebookPoints(checks, written)


def total(cuda: bool | None = None) -> float:
    """The assignment's maximum: the code's and the notebook's (autograded and written)."""
    return code_max(cuda) + notebook().total
