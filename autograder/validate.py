"""``python -m autograder validate``: prove the grader on known submissions, through the same path as ``grade``.

* the reference solutions get full marks and the released stubs zero;
* every catalogued bug (``tests/catalogue/bugs.toml``) loses points, fails each
  hidden test it names, and its feedback names its concept (the mutation score);
* every correct variant (``tests/catalogue/variants.toml``) keeps every point,
  except the tests it is allowed to lose;
* no hidden test broke on the grader's side.
"""

import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import paths
from .grading import grade_class
from .judge import CHECK_CRASHED
from .mutants import build, copy_package, load_catalogue

CATALOGUE = paths.REPO_ROOT / "tests" / "catalogue"


@dataclass(frozen=True)
class Verdict:
    """What validation concluded about one known submission."""

    student: str
    kind: str  # reference, stubs, bug, variant
    score: float
    max_score: float
    ok: bool
    problem: str = ""


def _judge_bug(bug, result):
    failed = {test.id: test for test in result.tests if test.status != "passed"}
    if not failed:
        return False, "escaped: no hidden test failed"
    missing = [name for name in bug.catches if name not in failed]
    if missing:
        return False, f"expected to fail but passed: {', '.join(missing)}"
    if bug.concept and not any(bug.concept.lower() in test.output.lower() for test in failed.values()):
        return False, f"caught, but no feedback names the concept {bug.concept!r}"
    return True, ""


def _judge_variant(variant, result):
    lost = [test.id for test in result.tests if test.status != "passed" and test.id not in variant.may_lose]
    return (not lost), (f"lost points on: {', '.join(lost)}" if lost else "")


def assess(results, bugs, variants):
    """Turn graded results into verdicts (pure: no grading happens here)."""
    verdicts = []
    for student, result in sorted(results.items()):
        grader_notes = [note for note in result.notes if note.startswith(("grader problem", "grading failed"))
                        or (student not in bugs and CHECK_CRASHED in note)]  # correct code must not crash a check
        if student == "reference":
            ok = result.score == result.max_score > 0
            problem = "" if result.score == result.max_score else "not full marks"
            kind = "reference"
        elif student == "stubs":
            ok, problem, kind = result.score == 0, "" if result.score == 0 else "stubs score points", "stubs"
        elif student in bugs:
            (ok, problem), kind = _judge_bug(bugs[student], result), "bug"
        else:
            (ok, problem), kind = _judge_variant(variants[student], result), "variant"
        if grader_notes:
            ok, problem = False, "; ".join(grader_notes)[:300]
        verdicts.append(Verdict(student, kind, result.score, result.max_score, ok, problem))
    return verdicts


def validate(sandbox_mode="auto", jobs=2, emit=print, catalogue=CATALOGUE):
    """Grade every known submission, print the table and the mutation score; return True when all is as expected."""
    bugs = {bug.id: bug for bug in load_catalogue(Path(catalogue) / "bugs.toml", "bug")}
    variants = {variant.id: variant for variant in load_catalogue(Path(catalogue) / "variants.toml", "variant")}
    with tempfile.TemporaryDirectory(prefix="mha-pe-validate-") as tmp:
        class_dir = Path(tmp) / "class"
        copy_package(paths.SOLUTIONS_DIR / paths.ASSIGNMENT_ID, class_dir / "reference")
        copy_package(paths.ASSIGNMENTS_DIR / paths.ASSIGNMENT_ID, class_dir / "stubs")
        for mutant in [*bugs.values(), *variants.values()]:
            build(mutant, class_dir / mutant.id)
        results = {result.student: result for result in grade_class(class_dir, Path(tmp) / "out", jobs=jobs,
                                                                      sandbox_mode=sandbox_mode, emit=lambda line: None,
                                                                      skip_notebook=True)}
    verdicts = assess(results, bugs, variants)
    emit(f"{'submission':<34} {'kind':<9} {'score':>9}  verdict")
    for verdict in verdicts:
        emit(f"{verdict.student:<34} {verdict.kind:<9} {verdict.score:>4g}/{verdict.max_score:<4g}  "
             f"{'ok' if verdict.ok else 'WRONG: ' + verdict.problem}")
    caught = [v for v in verdicts if v.kind == "bug" and not v.problem.startswith("escaped")]
    emit("")
    emit(f"mutation score: {len(caught)}/{len(bugs)} bugs caught ({100 * len(caught) / max(len(bugs), 1):.0f}%)")
    for verdict in verdicts:
        if verdict.kind == "bug" and not verdict.ok:
            emit(f"  bug {verdict.student}: {verdict.problem}")
    penalized = [v for v in verdicts if v.kind == "variant" and not v.ok]
    emit(f"correct variants keeping their points: {len(variants) - len(penalized)}/{len(variants)}")
    for verdict in penalized:
        emit(f"  variant {verdict.student}: {verdict.problem}")
    return all(verdict.ok for verdict in verdicts)
