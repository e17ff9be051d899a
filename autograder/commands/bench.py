"""Speed ratios measured side by side in one run (the kit's timing goals live here, not in tests).

Each comparison alternates the two contenders and keeps each one's best time,
so background load affects both alike.
"""

from __future__ import annotations

import math
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from ..lesson.assignment import Assignment
from .machine_load import busy_cpu_seconds, load_average, usable_cores
from ..lesson.reference import load_reference

# Goals as ratios to a bare torch import (issue "every core counts"): code grading per submission end to end at
# --jobs 1, the speed-up at --jobs 2, and a whole class with notebooks per student.
GRADING_GOAL = 0.10
SPEEDUP_GOAL = 1.7
CLASS_GOAL = 0.25
NBGRADER_SAMPLE = 10  # notebooks nbgrader's own autograde is timed on (seconds each): its rate, not a class


def bare_torch_import(repeats: int = 3) -> float:
    """Best wall time of a fresh ``python -c "import torch"``: the unit of the grading goals."""
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import torch"], check=True)
        best = min(best, time.perf_counter() - start)
    return best


def synthetic_class(folder: str | Path, size: int, assignment: Assignment, notebook: bytes | None = None) -> None:
    """``size`` submissions: copies of the reference and of typical bugs (the catalogue's demo bugs),
    alternating; each with ``notebook`` (its bytes) when given."""
    from ..lesson.catalogue import build, copy_package, load_catalogue

    bugs = [bug for bug in load_catalogue(assignment.catalogue / "bugs.toml", "bug") if bug.demo]
    for index in range(size):
        student = Path(folder) / f"student-{index:04d}"
        if index % 2 == 0 or not bugs:
            copy_package(assignment.solutions, student, assignment.contract.modules)
        else:
            build(bugs[(index // 2) % len(bugs)], student, assignment)
        if notebook is not None:
            (student / assignment.notebook).write_bytes(notebook)


class _Finishes:
    """A progress sink for the bench: when each student's result was written, and the busy CPU time then."""

    def __init__(self):
        self.marks = []

    def advance(self, detail=""):
        self.marks.append((time.perf_counter(), busy_cpu_seconds()))

    def close(self):
        pass


def grading_rate(class_dir: str | Path, jobs: int, assignment: Assignment, sandbox: str = "auto",
                 notebooks: bool = False) -> tuple[float, float, float | None]:
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
                    skip_notebook=not notebooks, assignment=assignment, unisolated_ok=True)
        whole = (time.perf_counter() - start) / max(len(finishes.marks), 1)
    first = len(finishes.marks) // 4
    (t0, cpu0), (t1, cpu1) = finishes.marks[first], finishes.marks[-1]
    per = (t1 - t0) / max(len(finishes.marks) - 1 - first, 1)
    cores = (cpu1 - cpu0) / max(t1 - t0, 1e-9) if cpu0 is not None and cpu1 is not None else None
    return whole, per, cores


def jobs_to_measure(cores: int | None = None) -> list[int]:
    """``--jobs`` settings worth timing here: 1 and 2, then 4 and 8 where this process may use that many cores
    (:func:`~.machine_load.usable_cores`: its affinity, capped by a container's CPU quota)."""
    cores = cores or usable_cores()
    return [1, 2] + [jobs for jobs in (4, 8) if cores >= jobs]


def grading_throughput(class_size: int, emit: Callable[[str], None], assignment: Assignment, unit: float,
                       sandbox: str = "auto", rounds: int = 3) -> tuple[dict[str, float], float]:
    """Per-submission grading cost of the code at each of :func:`jobs_to_measure`, as ratios to the unit, and each
    setting's speed-up over ``--jobs 1``; and the unit used.

    The settings alternate for ``rounds`` rounds and each keeps its best, as the other comparisons do. The unit is
    the best of ``unit`` (a bare torch import measured before) and one more import timed in each round, so it is
    sampled across the same stretch of the machine's time as the grading it divides. Each line also gives the
    spread of the rounds: how far one run of the bench can be trusted on this machine.
    """
    size, settings, runs = max(class_size, 2), jobs_to_measure(), {}
    with tempfile.TemporaryDirectory(prefix="grader-bench-class-") as tmp:
        synthetic_class(tmp, size, assignment)
        for _ in range(max(rounds, 1)):
            unit = min(unit, bare_torch_import(1))
            for jobs in settings:
                runs.setdefault(jobs, []).append(grading_rate(tmp, jobs, assignment, sandbox))
    best = {jobs: min(measured, key=lambda run: run[0]) for jobs, measured in runs.items()}
    results = {}
    for jobs in settings:
        whole, per, cores = best[jobs]
        results[f"grading_ratio_jobs{jobs}"] = whole / unit
        goal = (f" (goal <= {GRADING_GOAL:g}: {'met' if whole / unit <= GRADING_GOAL else 'MISSED'})"
                if jobs == 1 else "")
        load = f"; {cores:.1f} cores busy" if cores is not None else ""
        worst = max(run[0] for run in runs[jobs])
        emit(f"grading, --jobs {jobs}: {whole:.3f} s per submission end to end, start-up and reports included "
             f"({size} submissions, best of {len(runs[jobs])}, worst {worst:.3f} s) = {whole / unit:.3f} torch "
             f"imports{goal}; {per:.3f} s once under way{load}")
    for jobs in settings[1:]:
        speedup = best[1][0] / best[jobs][0]
        results["grading_speedup" if jobs == 2 else f"grading_speedup_jobs{jobs}"] = speedup
        goal = (f"goal >= {SPEEDUP_GOAL:g}: {'met' if speedup >= SPEEDUP_GOAL else 'MISSED'}" if jobs == 2
                else f"{jobs}x at best")
        rounds_apart = [one[0] / other[0] for one, other in zip(runs[1], runs[jobs])]
        emit(f"speed-up from --jobs {jobs}: {speedup:.2f}x ({goal}); once under way "
             f"{best[1][1] / best[jobs][1]:.2f}x; round by round {min(rounds_apart):.2f}-{max(rounds_apart):.2f}x")
    if len(settings) > 1:
        emit(fixed_cost_line(size, {jobs: best[jobs][:2] for jobs in settings}))
    emit(f"the unit, the best of every bare torch import in this run: {unit:.2f} s")
    return results, unit


def fixed_cost_line(size: int, rates: dict[int, tuple[float, float]]) -> str:
    """What a run pays once whatever the class size, at each ``--jobs`` of ``rates = {jobs: (seconds per
    submission end to end, seconds per submission once under way)}`` (``size`` submissions), and the end-to-end
    speed-up at ``--jobs 2`` that perfect scaling (twice as fast once under way) would show with it: start-up (the
    sandbox check, the warm worker's torch import) and the reports run once either way, so they cap what a class
    of this size can show, however well the judges share the work."""
    fixed = {jobs: size * (whole - per) for jobs, (whole, per) in rates.items()}
    graded = size * rates[1][1]
    ideal = (fixed[1] + graded) / (fixed[1] + graded / 2)
    paid = ", ".join(f"{seconds:.2f} s at --jobs {jobs}" for jobs, seconds in fixed.items())
    return (f"paid once a run, whatever the class size (start-up and reports): {paid}; with it, perfect scaling "
            f"would show {ideal:.2f}x at --jobs 2 for {size} submissions")


UID_GOAL = 2.0  # confined workers (--sandbox uid) per student, against bubblewrap's in the same run
UID_CLASS = 8  # students in the class both modes grade: a few rounds of forked workers, start-up included


def uid_against_bwrap(class_size: int, emit: Callable[[str], None], assignment: Assignment, unit: float,
                      rounds: int = 2) -> dict[str, float]:
    """Code grading per student at ``--jobs 1`` with confined workers (``--sandbox uid``) beside bubblewrap's, on
    one small class, alternated for ``rounds`` (each keeps its best), as ratios to ``unit``. Only where both modes
    work (uid needs root and a runtime every user can read); else one line says why not."""
    from ..errors import KitError
    from ..sandbox.isolation import choose_sandbox

    try:
        choose_sandbox("bwrap")
        choose_sandbox("uid")
    except KitError as error:
        emit(f"confined (uid) mode beside bubblewrap: not measured here ({error})")
        return {}
    size, best = max(min(class_size, UID_CLASS), 2), {}
    with tempfile.TemporaryDirectory(prefix="grader-bench-uid-") as tmp:
        synthetic_class(tmp, size, assignment)
        for _ in range(max(rounds, 1)):
            for mode in ("bwrap", "uid"):
                best[mode] = min(best.get(mode, math.inf), grading_rate(tmp, 1, assignment, mode)[0])
    ratio = best["uid"] / best["bwrap"]
    emit(f"confined (uid) mode, --jobs 1: {best['uid']:.3f} s per student end to end = {best['uid'] / unit:.3f} "
         f"torch imports; bubblewrap {best['bwrap']:.3f} s = {best['bwrap'] / unit:.3f} ({size} submissions, best "
         f"of {max(rounds, 1)} each): uid costs {ratio:.2f}x bubblewrap (goal <= {UID_GOAL:g}: "
         f"{'met' if ratio <= UID_GOAL else 'MISSED'})")
    return {"uid_ratio": best["uid"] / unit, "uid_over_bwrap": ratio}


def class_with_notebooks(class_size: int, emit: Callable[[str], None], assignment: Assignment, unit: float,
                         code_ratio: float | None = None, sandbox: str = "auto") -> dict[str, float]:
    """A whole class with notebooks graded end to end at ``--jobs 1`` (code, notebook, nbgrader's database,
    reports), per student as a ratio to ``unit``; beside it nbgrader's own autograde of the same notebooks
    (kernels unsandboxed), per notebook, on a sample of :data:`NBGRADER_SAMPLE`."""
    from ..notebook.nbgrader_tools import autograde

    size = max(class_size, 1)
    answered = assignment.source_notebook().read_bytes()  # every check passes; written answers wait for a human
    with tempfile.TemporaryDirectory(prefix="grader-bench-nbclass-") as tmp:
        synthetic_class(tmp, size, assignment, notebook=answered)
        whole, per, cores = grading_rate(tmp, 1, assignment, sandbox, notebooks=True)
    ratio = whole / unit
    load = f"; {cores:.1f} cores busy" if cores is not None else ""
    share = f"; code alone, above: {code_ratio:.3f}" if code_ratio is not None else ""
    emit(f"a class with notebooks, --jobs 1: {whole:.3f} s per student end to end ({size} students) = {ratio:.3f} "
         f"torch imports (goal <= {CLASS_GOAL:g}: {'met' if ratio <= CLASS_GOAL else 'MISSED'}){share}{load}")
    sample = min(size, NBGRADER_SAMPLE)
    with tempfile.TemporaryDirectory(prefix="grader-bench-nbgrader-") as course:
        start = time.perf_counter()
        autograde(Path(course) / "course", assignment, {f"student-{index:03d}": answered for index in range(sample)})
        own = (time.perf_counter() - start) / sample
    emit(f"nbgrader's own autograde of the same notebooks: {own:.3f} s per notebook ({sample} notebooks, "
         f"unsandboxed, notebook only) = {own / unit:.3f} torch imports")
    return {"class_notebook_ratio": ratio, "nbgrader_notebook_ratio": own / unit}


def run_bench(assignment: Assignment, repeats: int = 5, emit: Callable[[str], None] = print, class_size: int = 100,
              notebooks: int = 40) -> dict[str, float]:
    """Print every ratio with its goal (the lesson's own speed goals first, from its hooks); return them as a
    dict for callers that want numbers. ``notebooks``: the size of the class graded with its notebooks."""
    emit(f"torch {torch.__version__}, {torch.get_num_threads()} threads, best of {repeats}")
    results = {}
    hooks = assignment.load_hooks()
    if hooks is not None and hasattr(hooks, "speed_goals"):
        results.update(hooks.speed_goals(load_reference(assignment), repeats, emit))
    if not (class_size or (notebooks and assignment.notebook)):
        return results
    unit = bare_torch_import()
    load = load_average()
    emit(f"bare 'python -c \"import torch\"': {unit:.2f} s, best of 3 (the unit below, with one more import timed "
         f"in each grading round); {usable_cores()} cores usable" + (f", load average {load:.1f}" if load is not None else ""))
    if class_size:
        throughput, unit = grading_throughput(class_size, emit, assignment, unit, rounds=min(repeats, 3))
        results.update(throughput)
        results.update(uid_against_bwrap(class_size, emit, assignment, unit))
    if notebooks and assignment.notebook:
        results.update(class_with_notebooks(notebooks, emit, assignment, unit, results.get("grading_ratio_jobs1")))
    return results
