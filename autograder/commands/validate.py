"""``python -m autograder validate``: prove the grader on known submissions, through the same path as ``grade``.

* the reference solutions get full marks and the released stubs zero;
* every catalogued bug (the assignment's ``catalogue/bugs.toml``) loses points, fails each hidden test it names, and
  fails at least one visible test whose feedback names its concept (the mutation score);
* the diagnosis matrix: for each bug, the tests it fails, each marked on or off the concepts (topics) the bug
  declares; the precision is the share of all failing tests that are on their bug's concepts (goal
  :data:`PRECISION_GOAL`);
* no bug fails the tests of more than :data:`MAX_CONCEPTS` concepts (a check blocked by a broken part it needs
  is charged to that part's concept, :class:`~autograder.judge.rubric.NotChecked`);
* every correct variant (``catalogue/variants.toml``) keeps every point, except the tests it is allowed
  to lose;
* no hidden test broke on the grader's side;
* automatic mutants of the reference (:mod:`.auto_mutants`): those its probes can tell from the reference are
  graded; at least :data:`~.auto_mutants.CAUGHT_GOAL` of them caught and :data:`~.auto_mutants.WITHIN_GOAL` charged
  to at most :data:`MAX_CONCEPTS` concepts, every survivor with a reason in ``catalogue/survivors.toml``;
* with ``require_cuda`` (``make gpu-check``), CUDA is present and no GPU check was skipped.

Two reports hold nothing to a goal: each parametrized check's points (earned once per case), and the bugs no public
test catches (the lesson's public tests run against each bug, :mod:`~autograder.lesson.public_tests`).
"""

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..lesson import assignment as assignments
from ..errors import KitError
from . import auto_mutants
from .grading import grade_class
from ..judge.hidden_suite import collect_rubric
from ..lesson.catalogue import build, copy_package, distinct_ids, load_catalogue
from ..lesson.mutation import survivor_reasons
from ..lesson.public_tests import uncaught_by_public_tests
from ..worker.contract import Contract, resolve_path

PRECISION_GOAL = 0.95
MAX_CONCEPTS = 2  # a single mistake fails the tests of at most this many concepts


@dataclass(frozen=True)
class Verdict:
    """What validation concluded about one known submission."""

    student: str
    kind: str  # reference, stubs, bug, variant
    score: float
    max_score: float
    ok: bool
    problem: str = ""
    failures: tuple = field(default=())  # bugs: ((test id, concept it is charged to, on the bug's concepts), ...)
    waiting: tuple = field(default=())  # bugs: ((test id, the part it waited for, its points), ...): not checked
    stood_in: tuple = field(default=())  # bugs: ((test id, the parts it ran with stand-ins for), ...)


def charged_to(test, topic):
    """The concept a failed test is charged to: the part's, when a broken part kept it from checking its own
    (``charged_to``, :class:`~autograder.judge.rubric.NotChecked`); ``forbidden`` when it met a forbidden API, which
    fails every test that reaches it; else its own ``topic``."""
    if test.charged_to:
        return test.charged_to
    return "forbidden" if test.cause is not None and test.cause.kind == "forbidden" else topic


def _names(test, bug):
    """Whether a failed visible check's feedback teaches ``bug``'s concept: its own concept states it, or, for a
    bug declaring the ``forbidden`` topic, its cause is a forbidden API (the feedback names the API). Read from
    the record's typed fields, never from its wording."""
    if "forbidden" in bug.topics and test.cause is not None and test.cause.kind == "forbidden":
        return True
    return bool(bug.concept) and bug.concept.lower() in test.concept.lower()


def _judge_bug(bug, result, topics):
    failed = {test.id: test for test in result.tests if test.status == "failed"}
    charged = {test_id: charged_to(test, topics.get(test_id, test_id)) for test_id, test in failed.items()}
    failures = tuple((test_id, concept, concept in bug.topics) for test_id, concept in charged.items())
    if not failed:
        return False, "escaped: no hidden test failed", failures
    concepts = sorted({concept for _, concept, _ in failures})
    if len(concepts) > MAX_CONCEPTS:
        return False, f"charged to {len(concepts)} concepts ({', '.join(concepts)}), at most {MAX_CONCEPTS}", failures
    missing = [name for name in bug.catches if name not in failed]
    if missing:
        return False, f"expected to fail but passed: {', '.join(missing)}", failures
    named = [test for test in failed.values() if test.visibility == "visible" and _names(test, bug)]
    if bug.concept and not named:
        return False, f"caught, but no visible check's feedback names the concept {bug.concept!r}", failures
    unknown = [topic for topic in bug.topics if topic not in set(topics.values()) | {"forbidden"}]
    if unknown or not bug.topics:
        return False, f"declares unknown concepts {unknown}" if unknown else "declares no concept (topics)", failures
    return True, "", failures


def _judge_variant(variant, result):
    lost = [test.id for test in result.tests if test.status == "failed" and test.id not in variant.may_lose]
    return (not lost), (f"lost points on: {', '.join(lost)}" if lost else "")


def assess(results, bugs, variants, topics, require_cuda=False):
    """Turn graded results into verdicts (pure: no grading happens here). ``topics``: {hidden test id: concept}."""
    verdicts = []
    for student, result in sorted(results.items()):
        # Any grader-side failure is a problem; a crashed check only on correct code (a bug's data may crash one).
        grader_notes = [f"{failure.kind}: {failure.reason}" for failure in result.grader_failures
                        if failure.kind != "check_crashed" or student not in bugs]
        failures = ()
        if student == "reference":
            ok = result.score == result.max_score > 0
            problem = ("" if result.score == result.max_score > 0 else "not full marks" if result.max_score else
                       "no hidden test was collected (hidden_tests/pytest.ini's python_files, docs/authoring.md)")
            kind = "reference"
        elif student == "stubs":
            ok, problem, kind = result.score == 0, "" if result.score == 0 else "stubs score points", "stubs"
        elif student in bugs:
            (ok, problem, failures), kind = _judge_bug(bugs[student], result, topics), "bug"
        else:
            (ok, problem), kind = _judge_variant(variants[student], result), "variant"
        skipped = [test.id for test in result.tests if test.status == "skipped"]
        if require_cuda and skipped:
            ok, problem = False, f"skipped with CUDA required: {', '.join(skipped)}"
        if grader_notes:
            ok, problem = False, "; ".join(grader_notes)[:300]
        waiting = tuple((test.id, test.blocked_by, test.max_score) for test in result.tests
                        if test.status == "failed" and test.blocked_by)
        stood_in = tuple((test.id, test.stood_in) for test in result.tests if test.stood_in)
        verdicts.append(Verdict(student, kind, result.score, result.max_score, ok, problem, failures, waiting,
                                stood_in))
    return verdicts


def precision(verdicts):
    """``(failing tests on their bug's concepts, all failing tests)`` over every bug."""
    failures = [failure for verdict in verdicts if verdict.kind == "bug" for failure in verdict.failures]
    return sum(1 for _, _, on in failures if on), len(failures)


def diagnosis_matrix(verdicts, bugs):
    """Lines: each bug, its declared concepts, and the tests it fails (``*`` marks one off those concepts)."""
    lines = ["diagnosis matrix (bug [its concepts] -points lost: tests it fails, charged to concept, the part a test "
             "waited for; * = off its concepts; + n with stand-ins: checks of other code graded with a working part)"]
    for verdict in verdicts:
        if verdict.kind != "bug":
            continue
        waits = {test_id: part for test_id, part, _ in verdict.waiting}
        shown = ", ".join(f"{'*' if not on else ''}{test_id} ({concept}"
                          f"{', waits for ' + waits[test_id] if test_id in waits else ''})"
                          for test_id, concept, on in verdict.failures)
        stood = f"; + {len(verdict.stood_in)} with stand-ins" if verdict.stood_in else ""
        lines.append(f"  {verdict.student} [{', '.join(bugs[verdict.student].topics)}] "
                     f"-{verdict.max_score - verdict.score:g}: {shown or 'nothing'}{stood}")
    return lines


def waiting_summary(verdicts) -> str:
    """One line: the checks over all bugs that waited for a broken part (not checked, their points not earned),
    and those graded with a stand-in for one instead."""
    waiting = [item for verdict in verdicts if verdict.kind == "bug" for item in verdict.waiting]
    stood = sum(len(verdict.stood_in) for verdict in verdicts if verdict.kind == "bug")
    return (f"checks waiting for a broken part: {len(waiting)} ({sum(points for _, _, points in waiting):g} points) "
            f"over all bugs; graded with a stand-in for one instead: {stood}")


def points_per_check(entries) -> list[str]:
    """Lines: each parametrized check's points, ``name: N cases x P = total`` (it earns its points once per
    case), then one line for the checks of one case. ``entries``: the rubric's, in order."""
    checks: dict[str, list[float]] = {}
    for entry in entries:
        checks.setdefault(entry.id.split("[", 1)[0], []).append(entry.points)
    total = sum(sum(points) for points in checks.values())
    lines = [f"points per check ({total:g} in all; a parametrized check earns its points once per case):"]
    for name, points in checks.items():
        if len(points) > 1:
            each = f" x {points[0]:g}" if len(set(points)) == 1 else ""
            lines.append(f"  {name}: {len(points)} cases{each} = {sum(points):g}")
    single = [points[0] for points in checks.values() if len(points) == 1]
    if single:
        lines.append(f"  {len(single)} other check(s), one case each: {sum(single):g}")
    return lines


def _cuda_check():
    import torch

    if not torch.cuda.is_available():
        raise KitError("no CUDA device: the GPU check needs a machine where torch.cuda.is_available() "
                       f"(torch {torch.__version__}, CUDA build: {torch.version.cuda or 'no'})")


def validate(sandbox_mode="auto", jobs=2, emit=print, require_cuda=False, assignment=None, mutants=True) -> bool:
    """Grade every known submission of ``assignment`` (the kit's lesson by default): its reference, its stubs,
    its catalogue's bugs and variants; print the table, the mutation score, the diagnosis matrix and its
    precision; return True when all is as expected. ``require_cuda``: refuse to run without CUDA, and fail on
    any GPU check skipped. ``mutants``: also make, grade and report the automatic mutants."""
    if require_cuda:
        _cuda_check()
    assignment = assignments.resolve(assignment)
    unnamed = forbidden_naming_nothing(assignment.contract)
    for path in unnamed:
        emit(f"WRONG: forbidden API {path} names nothing a worker reaches here (a typo, a name this version "
             "lacks, or a submodule its package does not import itself): no worker could catch a call to it")
    modules = assignment.contract.modules
    bugs = {bug.id: bug for bug in load_catalogue(assignment.catalogue / "bugs.toml", "bug")}
    variants = {variant.id: variant for variant in load_catalogue(assignment.catalogue / "variants.toml", "variant")}
    distinct_ids(list(bugs.values()), list(variants.values()), taken=("reference", "stubs"))
    entries = collect_rubric(assignment.hidden_tests, assignment)  # one line if broken
    topics = {entry.id: entry.topic for entry in entries}
    with tempfile.TemporaryDirectory(prefix="validate-") as tmp:
        class_dir = Path(tmp) / "class"
        copy_package(assignment.solutions, class_dir / "reference", modules)
        copy_package(assignment.release, class_dir / "stubs", modules)
        for mutant in [*bugs.values(), *variants.values()]:
            build(mutant, class_dir / mutant.id, assignment)
        reasons = survivor_reasons(assignment) if mutants else {}
        equivalent = survivor_reasons(assignment, "equivalent") if mutants else {}
        graded, set_aside = auto_mutants.distinguishable(assignment, emit) if mutants else ([], [])
        distinct_ids([*bugs.values(), *variants.values()], [], taken=tuple(mutant.id for mutant in graded))
        for mutant in graded:
            auto_mutants.write(mutant, class_dir / mutant.id, assignment)
        results = {result.student: result for result in grade_class(class_dir, Path(tmp) / "out", jobs=jobs,
                                                                      sandbox_mode=sandbox_mode, emit=lambda line: None,
                                                                      skip_notebook=True, assignment=assignment,
                                                                      unisolated_ok=True)}
    automatic = [auto_mutants.judge(mutant, results.pop(mutant.id), topics, charged_to) for mutant in graded]
    verdicts = assess(results, bugs, variants, topics, require_cuda=require_cuda)
    if any(result.sandbox not in ("bwrap", "uid") for result in results.values()):  # the kit's own material only
        emit("SANDBOX OFF: graded without isolation (no sandbox works here)")
    emit(f"{'submission':<34} {'kind':<9} {'score':>9}  verdict")
    for verdict in verdicts:
        emit(f"{verdict.student:<34} {verdict.kind:<9} {verdict.score:>4g}/{verdict.max_score:<4g}  "
             f"{'ok' if verdict.ok else 'WRONG: ' + verdict.problem}")
    emit("")
    for line in diagnosis_matrix(verdicts, bugs):
        emit(line)
    on, total = precision(verdicts)
    share = on / total if total else 1.0
    emit("")
    caught = [v for v in verdicts if v.kind == "bug" and not v.problem.startswith("escaped")]
    emit(f"mutation score: {len(caught)}/{len(bugs)} bugs caught ({100 * len(caught) / max(len(bugs), 1):.0f}%)")
    for verdict in verdicts:
        if verdict.kind == "bug" and not verdict.ok:
            emit(f"  bug {verdict.student}: {verdict.problem}")
    emit(f"diagnosis precision: {on}/{total} failing tests on their bug's concepts ({100 * share:.1f}%, "
         f"goal {100 * PRECISION_GOAL:.0f}%)")
    emit(waiting_summary(verdicts))
    for line in points_per_check(entries):
        emit(line)
    unseen = uncaught_by_public_tests(assignment, list(bugs.values()), jobs)
    emit(f"Caught by no public test: {', '.join(unseen) or 'none'} ({len(unseen)} of {len(bugs)} bugs; "
         "a report only: students meet these first in the hidden checks)")
    penalized = [v for v in verdicts if v.kind == "variant" and not v.ok]
    emit(f"correct variants keeping their points: {len(variants) - len(penalized)}/{len(variants)}")
    for verdict in penalized:
        emit(f"  variant {verdict.student}: {verdict.problem}")
    mutants_ok = True
    if mutants:
        lines, mutants_ok = auto_mutants.report(automatic, set_aside, reasons, equivalent, MAX_CONCEPTS)
        if not (assignment.catalogue / "survivors.toml").is_file():  # reviewed mutants only are held to the goals
            lines.append("  (a report only: the lesson keeps no catalogue/survivors.toml, so its goals are not held)")
            mutants_ok = True
        for line in lines:
            emit(line)
    if require_cuda:
        emit("GPU check: CUDA present, no GPU check skipped" if all(v.ok for v in verdicts) else
             "GPU check: FAILED")
    return all(verdict.ok for verdict in verdicts) and share >= PRECISION_GOAL and not unnamed and mutants_ok


def forbidden_naming_nothing(contract: Contract) -> list[str]:
    """The contract's forbidden paths that name nothing here: the worker skips them (a library version without
    the call has nothing to trip on), so a misspelt one would leave the real call unwatched, silently."""
    return [path for path in contract.forbidden if resolve_path(path)[1] is None]
