"""Speed ratios measured side by side in one run (the kit's timing goals live here, not in tests).

Each comparison alternates the two contenders and keeps each one's best time,
so background load affects both alike.
"""

import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from . import paths
from .reference import load_public_checks, load_reference


def loop_encoding(max_seq_len, d_model, base=10000.0):
    """The lesson's baseline: NumPy scalar sin/cos, one Python iteration per (position, feature pair)."""
    table = np.zeros((max_seq_len, d_model))
    for pos in range(max_seq_len):
        for even in range(0, d_model, 2):
            angle = pos / base ** (even / d_model)
            table[pos, even] = np.sin(angle)
            table[pos, even + 1] = np.cos(angle)
    return table


def best_times(contenders, repeats):
    """Run each zero-argument callable ``repeats`` times, interleaved; return each one's best seconds."""
    best = [math.inf] * len(contenders)
    for _ in range(repeats):
        for index, call in enumerate(contenders):
            start = time.perf_counter()
            call()
            best[index] = min(best[index], time.perf_counter() - start)
    return best


def encoding_speedup(reference, repeats):
    """Seconds for the loop and the reference on a (2048, 512) table, and their ratio."""
    fast = lambda: reference.get_positional_encoding(2048, 512)  # noqa: E731
    slow = lambda: loop_encoding(2048, 512)  # noqa: E731
    fast()  # warm up kernels
    t_slow, t_fast = best_times([slow, fast], max(1, min(repeats, 2)))
    t_fast = min(t_fast, *best_times([fast], repeats * 4))
    return t_slow, t_fast, t_slow / t_fast


def attention_ratio(reference, repeats, need_weights):
    """Seconds for the reference module and torch's with the same weights, and their ratio."""
    batch, seq, d_model, heads = 8, 256, 512, 8
    torch.manual_seed(0)
    ours = reference.MultiHeadAttention(d_model, heads).eval()
    checks = load_public_checks()
    theirs = checks.torch_twin(checks.projection_weights(ours), d_model, heads)
    x = torch.randn(batch, seq, d_model)

    def run_ours():
        with torch.no_grad():
            ours(x, return_weights=need_weights)

    def run_theirs():
        with torch.no_grad():
            theirs(x, x, x, need_weights=need_weights, average_attn_weights=False)

    best_times([run_ours, run_theirs], 2)  # warm up
    t_ours, t_theirs = best_times([run_ours, run_theirs], repeats)
    return t_ours, t_theirs, t_ours / t_theirs


def bare_torch_import(repeats=3):
    """Best wall time of a fresh ``python -c "import torch"``: the unit of the grading goals."""
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import torch"], check=True)
        best = min(best, time.perf_counter() - start)
    return best


def synthetic_class(folder, size):
    """``size`` submissions: copies of the reference and of typical bugs, alternating."""
    from .mutants import build, copy_package, load_catalogue

    bugs = [bug for bug in load_catalogue(paths.REPO_ROOT / "tests" / "catalogue" / "bugs.toml", "bug") if bug.demo]
    for index in range(size):
        if index % 2 == 0 or not bugs:
            copy_package(paths.SOLUTIONS_DIR / paths.ASSIGNMENT_ID, Path(folder) / f"student-{index:04d}")
        else:
            build(bugs[(index // 2) % len(bugs)], Path(folder) / f"student-{index:04d}")


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


def grading_rate(class_dir, jobs, sandbox="auto"):
    """``(seconds per submission end to end, seconds per submission once under way, cores busy)`` of the grade
    command.

    End to end is the whole command (sandbox probe, judges, collecting the hidden tests, the warm worker,
    grading, reports and figures) divided by the class size: the goal's measure. Once under way is the slope of
    the finishing times after the first quarter of the class (start-up not counted); cores busy is the
    machine's busy CPU time over that stretch (None where it cannot be read).
    """
    from .grading import grade_class

    finishes = _Finishes()
    with tempfile.TemporaryDirectory(prefix="mha-pe-bench-out-") as out:
        start = time.perf_counter()
        grade_class(class_dir, out, jobs=jobs, sandbox_mode=sandbox, emit=lambda line: None, progress=finishes,
                    skip_notebook=True)
        whole = (time.perf_counter() - start) / max(len(finishes.marks), 1)
    first = len(finishes.marks) // 4
    (t0, cpu0), (t1, cpu1) = finishes.marks[first], finishes.marks[-1]
    per = (t1 - t0) / max(len(finishes.marks) - 1 - first, 1)
    cores = (cpu1 - cpu0) / max(t1 - t0, 1e-9) if cpu0 is not None and cpu1 is not None else None
    return whole, per, cores


def grading_throughput(class_size, emit, sandbox="auto", rounds=2):
    """Per-submission grading cost at --jobs 1 and 2, as ratios to a bare torch import measured alongside.

    The two settings alternate for ``rounds`` rounds and each keeps its best, as the other comparisons do.
    """
    unit = bare_torch_import()
    emit(f"bare 'python -c \"import torch\"': {unit:.2f} s (the unit below); {os.cpu_count()} cores")
    results, best = {}, {}
    with tempfile.TemporaryDirectory(prefix="mha-pe-bench-class-") as tmp:
        synthetic_class(tmp, max(class_size, 2))
        for _ in range(max(rounds, 1)):
            for jobs in (1, 2):
                measured = grading_rate(tmp, jobs, sandbox)
                if jobs not in best or measured[0] < best[jobs][0]:
                    best[jobs] = measured
        for jobs in (1, 2):
            whole, per, cores = best[jobs]
            results[jobs] = whole / unit
            goal = f" (goal <= 0.15: {'met' if whole / unit <= 0.15 else 'MISSED'})" if jobs == 1 else ""
            load = f"; {cores:.1f} cores busy" if cores is not None else ""
            emit(f"grading, --jobs {jobs}: {whole:.3f} s per submission end to end, start-up and reports included "
                 f"({max(class_size, 2)} submissions, best of {max(rounds, 1)}) = {whole / unit:.3f} torch imports"
                 f"{goal}; {per:.3f} s once under way{load}")
    speedup = results[1] / results[2]
    emit(f"speed-up from --jobs 2: {speedup:.2f}x (goal: near-linear, close to 2x on 2 cores)")
    return {"grading_ratio_jobs1": results[1], "grading_ratio_jobs2": results[2], "grading_speedup": speedup}


def notebook_stage(count, emit, sandbox_mode="auto"):
    """Seconds per notebook at --jobs 1: this kit's notebook stage (a worker forked per notebook runs the cells,
    the judge runs the checks, nbgrader's database written) next to nbgrader's own autograde of the same
    notebooks, both as ratios to a bare ``import torch``."""
    from . import nbgrader_record, notebook_stage as stage
    from .notebooks import SOURCE_NOTEBOOK, autograde
    from .results import SubmissionResult
    from .sandbox import choose_sandbox
    from .submission import read_submission
    from .launch import WorkerFactory

    sandbox = choose_sandbox(sandbox_mode)
    intake = read_submission(paths.SOLUTIONS_DIR / paths.ASSIGNMENT_ID)
    intake = type(intake)(intake.files, SOURCE_NOTEBOOK.read_bytes(), {})
    unit = bare_torch_import()
    seconds = {}
    with tempfile.TemporaryDirectory(prefix="mha-pe-bench-nb-") as out:
        factory = WorkerFactory(sandbox, out)
        try:
            factory.forks  # the zygote (a torch import) is the code stage's: started before the clock
            start = time.perf_counter()
            graded = [stage.grade_into(SubmissionResult(f"student-{index:03d}"), intake, sandbox,
                                       factory.notebook_launcher(intake.files, out), out) for index in range(count)]
            nbgrader_record.record(nbgrader_record.course_dir(out), graded)
            seconds["this kit's notebook stage"] = (time.perf_counter() - start) / count
        finally:
            factory.close()
        if not all(result.score == 3 for result in graded):
            emit("WARNING: the reference notebook did not earn its 3 autograded points in the bench")
    with tempfile.TemporaryDirectory(prefix="mha-pe-bench-nb-") as course:
        start = time.perf_counter()
        autograde(Path(course) / "course", {f"student-{index:03d}": SOURCE_NOTEBOOK.read_bytes()
                                            for index in range(count)})
        seconds["nbgrader's own autograde"] = (time.perf_counter() - start) / count
    for label, per in seconds.items():
        emit(f"notebooks, {label}: {per:.3f} s per notebook = {per / unit:.2f} torch imports ({count} notebooks, "
             "one-time costs included)")
    ratio, own = seconds["this kit's notebook stage"] / unit, seconds["nbgrader's own autograde"] / unit
    emit(f"notebook stage: {ratio:.2f} torch imports per notebook at --jobs 1 "
         f"(goal <= 0.3: {'met' if ratio <= 0.3 else 'MISSED'}); nbgrader's own autograde: {own:.2f}")
    return {"notebook_seconds": seconds["this kit's notebook stage"], "notebook_ratio": ratio}


def run_bench(repeats=5, emit=print, class_size=100, notebooks=20):
    """Print every ratio with its goal; return them as a dict for callers that want numbers."""
    reference = load_reference()
    emit(f"torch {torch.__version__}, {torch.get_num_threads()} threads, best of {repeats}")
    t_slow, t_fast, speedup = encoding_speedup(reference, repeats)
    emit(
        f"positional encoding (2048, 512): loop {t_slow * 1e3:.1f} ms, reference {t_fast * 1e3:.2f} ms "
        f"-> {speedup:.0f}x faster (goal >= 50x: {'met' if speedup >= 50 else 'MISSED'})"
    )
    results = {"encoding_speedup": speedup}
    for need_weights in (False, True):
        t_ours, t_theirs, ratio = attention_ratio(reference, repeats, need_weights)
        label = "weights returned" if need_weights else "output only"
        emit(
            f"multi-head attention (8, 256, 512, 8 heads, {label}): reference {t_ours * 1e3:.1f} ms, "
            f"nn.MultiheadAttention {t_theirs * 1e3:.1f} ms -> {ratio:.2f}x its time "
            f"(goal <= 1.5x: {'met' if ratio <= 1.5 else 'MISSED'})"
        )
        results[f"attention_ratio_{label.replace(' ', '_')}"] = ratio
    if class_size:
        results.update(grading_throughput(class_size, emit, rounds=min(repeats, 2)))
    if notebooks:
        results.update(notebook_stage(notebooks, emit))
    return results
