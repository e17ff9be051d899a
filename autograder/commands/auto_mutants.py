"""``validate``'s automatic mutants: which differ from the reference, how the grader judged each, what survived.

The mutants come from :mod:`autograder.lesson.mutation`. A mutant whose answers to the lesson's probes (its hooks'
``mutant_probes(package)``) are the reference's is indistinguishable and set aside (no check could fail it); the
rest are graded with the class of known submissions. A survivor (no check failed) is a rule the hidden tests do
not check. The lesson keeps a reason for each survivor and each mutant set aside in ``catalogue/survivors.toml``
(``[[survivor]]`` and ``[[equivalent]]``, each with ``edit``, the mutant's key, and ``reason``), which
docs/rubric.md shows: a mutant set aside without one may be a probe missing, a survivor without one a check missing.
"""

from __future__ import annotations

import contextlib
import math
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..lesson.assignment import Assignment
from ..lesson.mutation import AutoMutant, generate
from ..lesson.reference import load_package, load_reference

CAUGHT_GOAL = 0.98  # share of the distinguishable mutants some check fails
WITHIN_GOAL = 0.97  # share of them charged to at most two concepts
PROBE_SECONDS = 10  # a mutant's probes that run longer are stopped (it differs: the reference's do not)


@dataclass(frozen=True)
class AutoVerdict:
    """How the grader judged one graded automatic mutant."""

    mutant: AutoMutant
    caught: bool
    concepts: tuple[str, ...]  # the concepts its failed checks are charged to
    lost: float  # points lost


def same(a: Any, b: Any) -> bool:
    """Whether two probe answers agree (tensors within float tolerance, same shape and dtype; NaN matches NaN)."""
    import torch

    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
                and a.dtype == b.dtype and a.device == b.device
                and (a.numel() == 0 or torch.allclose(a.detach().double(), b.detach().double(), atol=1e-6, rtol=1e-5,
                                                      equal_nan=True)))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-6)
    return type(a) is type(b) and a == b


@contextlib.contextmanager
def _time_limit(seconds: int):
    def stop(signum, frame):
        raise TimeoutError("probes ran too long")

    before = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)


def _answers(probes: Callable, package_dir: Path, name: str) -> Any:
    """The probes' answers for the package in ``package_dir`` (imported as ``name``, then forgotten)."""
    try:
        with _time_limit(PROBE_SECONDS):
            return probes(load_package(package_dir, name))
    except Exception as error:  # noqa: BLE001 - a mutant that cannot even be probed differs from the reference
        return f"could not be probed: {type(error).__name__}"
    finally:
        for module in [module for module in sys.modules if module == name or module.startswith(name + ".")]:
            del sys.modules[module]


def distinguishable(assignment: Assignment, emit: Callable[[str], None]) -> tuple[list[AutoMutant], list[AutoMutant]]:
    """``(mutants to grade, mutants set aside as indistinguishable)``: every automatic mutant of the reference,
    less those whose probe answers are the reference's. Without a ``mutant_probes`` hook, all of them."""
    mutants = generate(assignment.solutions, assignment.contract.modules)
    hooks = assignment.load_hooks()
    probes = getattr(hooks, "mutant_probes", None)
    if probes is None:
        return mutants, []
    expected = probes(load_reference(assignment))
    kept = []
    with tempfile.TemporaryDirectory(prefix="mutants-") as tmp:
        for index, mutant in enumerate(mutants):
            folder = Path(tmp) / mutant.id
            shutil.copytree(assignment.solutions, folder, ignore=shutil.ignore_patterns("tests", "__pycache__",
                                                                                       "*.ipynb"))
            (folder / mutant.file).write_text(mutant.text, encoding="utf-8")
            if not same(_answers(probes, folder, f"{assignment.id}_mutant_{index}"), expected):
                kept.append(mutant)
            if (index + 1) % 50 == 0:
                emit(f"probing automatic mutants: {index + 1}/{len(mutants)}")
    return kept, [mutant for mutant in mutants if mutant not in kept]


def write(mutant: AutoMutant, folder: Path, assignment: Assignment) -> None:
    """The mutant as a student's folder: the reference's modules, the mutated one replaced."""
    folder.mkdir(parents=True, exist_ok=True)
    for module in assignment.contract.modules:
        shutil.copyfile(assignment.solutions / f"{module}.py", folder / f"{module}.py")
    (folder / mutant.file).write_text(mutant.text, encoding="utf-8")


def judge(mutant: AutoMutant, result, topics: dict[str, str], charged_to: Callable) -> AutoVerdict:
    failed = [test for test in result.tests if test.status == "failed"]
    concepts = tuple(sorted({charged_to(test, topics.get(test.id, test.id)) for test in failed}))
    return AutoVerdict(mutant, bool(failed), concepts, result.max_score - result.score)


def report(verdicts: list[AutoVerdict], set_aside: list[AutoMutant], reasons: dict[str, str],
           equivalent: dict[str, str], max_concepts: int) -> tuple[list[str], bool]:
    """The report's lines and whether the goals hold (caught, within ``max_concepts``, every survivor and every
    mutant set aside with its reason)."""
    graded = len(verdicts)
    caught = [verdict for verdict in verdicts if verdict.caught]
    within = [verdict for verdict in caught if len(verdict.concepts) <= max_concepts]
    survivors = [verdict for verdict in verdicts if not verdict.caught]
    unreasoned = [verdict for verdict in survivors if verdict.mutant.key not in reasons]
    share = len(caught) / graded if graded else 1.0
    share_within = len(within) / graded if graded else 1.0
    losses = sorted(verdict.lost for verdict in caught)
    lines = [f"automatic mutants: {graded + len(set_aside)} made, {len(set_aside)} indistinguishable from the reference on its "
             f"probes, {graded} graded: {len(caught)} caught ({100 * share:.1f}%, goal {100 * CAUGHT_GOAL:.0f}%), "
             f"{len(within)} within {max_concepts} concepts ({100 * share_within:.1f}%, goal "
             f"{100 * WITHIN_GOAL:.0f}%)"]
    if losses:
        lines.append(f"  points lost by a caught mutant: median {losses[len(losses) // 2]:g}, most {losses[-1]:g}")
    for verdict in caught:
        wide = len(verdict.concepts) > max_concepts
        lines.append(f"  {'WRONG: ' if wide else ''}-{verdict.lost:g} [{', '.join(verdict.concepts)}] "
                     f"{verdict.mutant.diff_line()}")
    for verdict in survivors:
        reason = reasons.get(verdict.mutant.key)
        lines.append(f"  survivor: {verdict.mutant.diff_line()}: "
                     + (reason if reason else "WRONG: no reason in catalogue/survivors.toml"))
    unexplained = [mutant for mutant in set_aside if mutant.key not in equivalent]
    lines += [f"  WRONG: set aside without a reason in catalogue/survivors.toml (a probe may be missing): "
              f"{mutant.diff_line()}" for mutant in unexplained]
    stale = sorted(set(reasons) - {verdict.mutant.key for verdict in survivors})
    stale += sorted(set(equivalent) - {mutant.key for mutant in set_aside})
    lines += [f"  no longer made or no longer so, its reason can go: {key}" for key in stale]
    ok = share >= CAUGHT_GOAL and share_within >= WITHIN_GOAL and not unreasoned and not unexplained
    return lines, ok
