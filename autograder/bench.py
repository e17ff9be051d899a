"""Speed ratios measured side by side in one run (the kit's timing goals live here, not in tests).

Each comparison alternates the two contenders and keeps each one's best time,
so background load affects both alike.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from .assignment import Assignment
from .reference import load_reference

# Goals as ratios to a bare torch import: code grading per submission end to end at --jobs 1, the notebook stage.
GRADING_GOAL = 0.13
NOTEBOOK_GOAL = 0.3


def bare_torch_import(repeats: int = 3) -> float:
    """Best wall time of a fresh ``python -c "import torch"``: the unit of the grading goals."""
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import torch"], check=True)
        best = min(best, time.perf_counter() - start)
    return best


def synthetic_class(folder: str | Path, size: int, assignment: Assignment) -> None:
    """``size`` submissions: copies of the reference and of typical bugs (the catalogue's demo bugs),
    alternating."""
    from .mutants import build, copy_package, load_catalogue

    bugs = [bug for bug in load_catalogue(assignment.catalogue / "bugs.toml", "bug") if bug.demo]
    for index in range(size):
        if index % 2 == 0 or not bugs:
            copy_package(assignment.solutions, Path(folder) / f"student-{index:04d}", assignment.contract.modules)
        else:
            build(bugs[(index // 2) % len(bugs)], Path(folder) / f"student-{index:04d}", assignment)


def busy_cpu_seconds():
    """CPU seconds this machine's cores have spent busy since boot (Linux ``/proc/stat``), or None elsewhere."""
    try:
        ticks = [int(field) for field in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except (OSError, ValueError):
        return None
    idle = ticks[3] + ticks[4]  # idle and iowait
    return (sum(ticks) - idle) / os.sysconf("SC_CLK_TCK")


class _Finishes:
    """A progress sink for the bench: when each student's result was written, and the busy CPU time then."""

    def __init__(self):
        self.marks = []

    def advance(self, detail=""):
        self.marks.append((time.perf_counter(), busy_cpu_seconds()))

    def close(self):
        pass


def grading_rate(class_dir: str | Path, jobs: int, assignment: Assignment, sandbox: str = "auto"
                 ) -> tuple[float, float, float | None]:
    """``(seconds per submission end to end, seconds per submission once under way, cores busy)`` of the grade
    command.

    End to end is the whole command (sandbox probe, judges, collecting the hidden tests, the warm worker,
    grading, reports and figures) divided by the class size: the goal's measure. Once under way is the slope of
    the finishing times after the first quarter of the class (start-up not counted); cores busy is the
    machine's busy CPU time over that stretch (None where it cannot be read).
    """
    from .grading import grade_class

    finishes = _Finishes()
    with tempfile.TemporaryDirectory(prefix="grader-bench-out-") as out:
        start = time.perf_counter()
        grade_class(class_dir, out, jobs=jobs, sandbox_mode=sandbox, emit=lambda line: None, progress=finishes,
                    skip_notebook=True, assignment=assignment, unisolated_ok=True)
        whole = (time.perf_counter() - start) / max(len(finishes.marks), 1)
    first = len(finishes.marks) // 4
    (t0, cpu0), (t1, cpu1) = finishes.marks[first], finishes.marks[-1]
    per = (t1 - t0) / max(len(finishes.marks) - 1 - first, 1)
    cores = (cpu1 - cpu0) / max(t1 - t0, 1e-9) if cpu0 is not None and cpu1 is not None else None
    return whole, per, cores


def grading_throughput(class_size: int, emit: Callable[[str], None], assignment: Assignment, sandbox: str = "auto",
                       rounds: int = 2) -> dict[str, float]:
    """Per-submission grading cost at --jobs 1 and 2, as ratios to a bare torch import measured alongside.

    The two settings alternate for ``rounds`` rounds and each keeps its best, as the other comparisons do.
    """
    unit = bare_torch_import()
    emit(f"bare 'python -c \"import torch\"': {unit:.2f} s (the unit below); {os.cpu_count()} cores")
    results, best = {}, {}
    with tempfile.TemporaryDirectory(prefix="grader-bench-class-") as tmp:
        synthetic_class(tmp, max(class_size, 2), assignment)
        for _ in range(max(rounds, 1)):
            for jobs in (1, 2):
                measured = grading_rate(tmp, jobs, assignment, sandbox)
                if jobs not in best or measured[0] < best[jobs][0]:
                    best[jobs] = measured
        for jobs in (1, 2):
            whole, per, cores = best[jobs]
            results[jobs] = whole / unit
            goal = (f" (goal <= {GRADING_GOAL:g}: {'met' if whole / unit <= GRADING_GOAL else 'MISSED'})"
                    if jobs == 1 else "")
            load = f"; {cores:.1f} cores busy" if cores is not None else ""
            emit(f"grading, --jobs {jobs}: {whole:.3f} s per submission end to end, start-up and reports included "
                 f"({max(class_size, 2)} submissions, best of {max(rounds, 1)}) = {whole / unit:.3f} torch imports"
                 f"{goal}; {per:.3f} s once under way{load}")
    speedup = results[1] / results[2]
    emit(f"speed-up from --jobs 2: {speedup:.2f}x (goal: near-linear, close to 2x on 2 cores)")
    return {"grading_ratio_jobs1": results[1], "grading_ratio_jobs2": results[2], "grading_speedup": speedup}


def notebook_stage(count: int, emit: Callable[[str], None], assignment: Assignment, sandbox_mode: str = "auto"
                   ) -> dict[str, float]:
    """Seconds per notebook at --jobs 1: this kit's notebook stage (a worker forked per notebook runs the cells,
    the judge runs the checks, nbgrader's database written) next to nbgrader's own autograde of the same
    notebooks, both as ratios to a bare ``import torch``."""
    from . import nbgrader_record, notebook_stage as stage
    from .notebooks import autograde, source_cells
    from .results import SubmissionResult
    from .sandbox import choose_sandbox
    from .submission import read_submission
    from .launch import WorkerFactory

    sandbox = choose_sandbox(sandbox_mode, unisolated_ok=True)  # the kit's own material
    answered = assignment.source_notebook().read_bytes()
    intake = read_submission(assignment.solutions, assignment.contract)
    intake = type(intake)(intake.files, answered, {})
    unit = bare_torch_import()
    seconds = {}
    with tempfile.TemporaryDirectory(prefix="grader-bench-nb-") as out:
        factory = WorkerFactory(sandbox, out, assignment)
        try:
            factory.forks  # the zygote (a torch import) is the code stage's: started before the clock
            start = time.perf_counter()
            graded = [stage.grade_into(SubmissionResult(f"student-{index:03d}"), intake, sandbox,
                                       factory.notebook_launcher(intake.files, out), out, assignment)
                      for index in range(count)]
            nbgrader_record.record(nbgrader_record.course_dir(out), graded, assignment)
            seconds["this kit's notebook stage"] = (time.perf_counter() - start) / count
        finally:
            factory.close()
        autograded = sum(points for points, automatic in source_cells(assignment).values() if automatic)
        if not all(result.score == autograded for result in graded):
            emit(f"WARNING: the reference notebook did not earn its {autograded:g} autograded points in the bench")
    with tempfile.TemporaryDirectory(prefix="grader-bench-nb-") as course:
        start = time.perf_counter()
        autograde(Path(course) / "course", assignment, {f"student-{index:03d}": answered for index in range(count)})
        seconds["nbgrader's own autograde"] = (time.perf_counter() - start) / count
    for label, per in seconds.items():
        emit(f"notebooks, {label}: {per:.3f} s per notebook = {per / unit:.2f} torch imports ({count} notebooks, "
             "one-time costs included)")
    ratio, own = seconds["this kit's notebook stage"] / unit, seconds["nbgrader's own autograde"] / unit
    emit(f"notebook stage: {ratio:.2f} torch imports per notebook at --jobs 1 "
         f"(goal <= {NOTEBOOK_GOAL:g}: {'met' if ratio <= NOTEBOOK_GOAL else 'MISSED'}); "
         f"nbgrader's own autograde: {own:.2f}")
    return {"notebook_seconds": seconds["this kit's notebook stage"], "notebook_ratio": ratio}


def run_bench(assignment: Assignment, repeats: int = 5, emit: Callable[[str], None] = print, class_size: int = 100,
              notebooks: int = 20) -> dict[str, float]:
    """Print every ratio with its goal (the lesson's own speed goals first, from its hooks); return them as a
    dict for callers that want numbers."""
    emit(f"torch {torch.__version__}, {torch.get_num_threads()} threads, best of {repeats}")
    results = {}
    hooks = assignment.load_hooks()
    if hooks is not None and hasattr(hooks, "speed_goals"):
        results.update(hooks.speed_goals(load_reference(assignment), repeats, emit))
    if class_size:
        results.update(grading_throughput(class_size, emit, assignment, rounds=min(repeats, 2)))
    if notebooks and assignment.notebook:
        results.update(notebook_stage(notebooks, emit, assignment))
    return results
