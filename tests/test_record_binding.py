"""A record is bound to its student and its file: the seal covers both, and ``--resume``, ``merge`` and
``final-gradebook`` read each record at the path its student's id gives, so a forged record written beside the
genuine one, a classmate's record copied over a student's, or a renamed record is refused by name (or, under
``--resume``, regraded). And the grading fingerprint covers every module the judge and the worker import, so a
change to any of them invalidates old records."""

import ast
import json
import re
import shutil
from pathlib import Path

import pytest

from autograder import paths
from autograder.commands.final_gradebook import export_final_gradebook
from autograder.commands.grading import grade_class
from autograder.commands.merge import merge
from autograder.commands.planning import write_shard_file
from autograder.errors import KitError
from autograder.intake import fingerprints
from autograder.intake.naming import result_path
from autograder.lesson.catalogue import copy_package
from autograder.records import seal as seals
from autograder.records.results import FORGED, MISPLACED, SubmissionResult, TestResult, load_record, save
from autograder.sandbox import isolation as sandboxes
from lesson import LESSON, MODULES, RELEASE, SOLUTIONS

ENGINE = paths.REPO_ROOT / "autograder"
FINGERPRINT = fingerprints.grader_fingerprint  # the real one: ``graded`` pins it while the module runs


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The smallest class that shows a grade worth stealing: ``ada`` (the reference: full marks) and ``bo``
    (the released stubs: 0), graded once; tests work on copies of its output folder. The engine's fingerprint is
    pinned for the module (its own tests are below): the kit's source may change under a shared checkout."""
    try:
        sandboxes.choose_sandbox("isolated")
    except KitError as error:
        pytest.skip(f"needs a sandbox: {error}")
    root = tmp_path_factory.mktemp("binding")
    copy_package(SOLUTIONS, root / "class" / "ada", MODULES)
    copy_package(RELEASE, root / "class" / "bo", MODULES)
    pinned = fingerprints.grader_fingerprint(LESSON.grading_inputs())
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fingerprints, "grader_fingerprint", lambda inputs, engine=ENGINE: pinned)
        results = {r.student: r for r in grade_class(root / "class", root / "out", jobs=1, skip_notebook=True,
                                                     emit=lambda line: None)}
        top = results["ada"].max_score
        assert (results["ada"].score, results["bo"].score) == (top, 0) and top > 0
        yield root / "class", root / "out", results


def _copy(out, to):
    shutil.copytree(out, to)
    return to


def _files(out):
    return {path.name: path.read_bytes() for path in (out / "results").iterdir()}


@pytest.mark.slow
def test_a_record_forged_beside_the_genuine_one_is_refused_by_its_file_and_nothing_is_sealed(graded, tmp_path):
    _, out, results = graded
    out = _copy(out, tmp_path / "out")
    forged = json.loads(result_path(out, "bo").read_text())
    for test in forged["tests"]:
        test["score"] = test["max_score"]
    forged["score"] = results["ada"].max_score
    forged["extra_data"].pop(seals.FIELD)
    (out / "results" / "0-forged.json").write_text(json.dumps(forged))  # claims bo, beside bo's own record
    before = _files(out)
    with pytest.raises(KitError, match="final-gradebook refused") as refused:
        export_final_gradebook(out)
    message = str(refused.value)
    assert "\n" not in message and f"{MISPLACED}: 'results/0-forged.json'" in message
    assert "'bo'" not in message and "'ada'" not in message  # the genuine records are not the problem
    assert _files(out) == before, "nothing sealed, nothing rewritten: the forgery's bytes are unchanged"
    assert not (out / "final_gradebook.csv").exists()
    # A byte-for-byte copy of the genuine sealed record beside it is a second record of bo: refused the same way.
    (out / "results" / "0-forged.json").write_bytes(result_path(out, "bo").read_bytes())
    with pytest.raises(KitError, match="'results/0-forged.json'"):
        export_final_gradebook(out)
    (out / "results" / "0-forged.json").unlink()
    (out / "results" / "notes.txt").write_text("a stray")
    with pytest.raises(KitError, match="'results/notes.txt'"):
        export_final_gradebook(out)
    (out / "results" / "notes.txt").unlink()
    export_final_gradebook(out)
    rows = (out / "final_gradebook.csv").read_text().splitlines()
    assert [row.split(",")[:2] for row in rows[1:]] == [["ada", f"{results['ada'].max_score:g}"], ["bo", "0"]]


def _shards(out, root):
    """``out``'s two records as two shards (1/2: ada, 2/2: bo), as two machines under one key would leave them."""
    folders = []
    for index, student in enumerate(("ada", "bo"), 1):
        folder = root / f"shard{index}"
        result_path(folder, student).parent.mkdir(parents=True)
        shutil.copyfile(result_path(out, student), result_path(folder, student))
        write_shard_file(folder, (index, 2), [student])
        folders.append(folder)
    return folders


@pytest.mark.slow
def test_a_classmates_record_copied_over_a_students_is_refused_by_merge_naming_both(graded, tmp_path):
    _, out, results = graded
    one, two = _shards(out, tmp_path)
    merged = merge([one, two], tmp_path / "merged", emit=lambda line: None)
    assert [(r.student, r.score) for r in merged] == [("ada", results["ada"].score), ("bo", 0)]
    shutil.copyfile(result_path(one, "ada"), result_path(two, "bo"))  # ada's sealed record over bo's
    with pytest.raises(KitError, match="merge refused") as refused:
        merge([one, two], tmp_path / "again", emit=lambda line: None)
    message = str(refused.value)
    assert "\n" not in message and f"{result_path(two, 'bo')} holds 'ada''s record, not 'bo''s" in message
    assert not (tmp_path / "again").exists()


@pytest.mark.slow
def test_a_record_renamed_to_another_students_path_is_refused(graded, tmp_path):
    _, out, _ = graded
    out = _copy(out, tmp_path / "out")
    result_path(out, "ada").replace(result_path(out, "bo"))  # ada's full marks, now where bo's record belongs
    assert load_record(result_path(out, "bo"))[1] == MISPLACED
    with pytest.raises(KitError, match=re.escape(f"{MISPLACED}: 'results/bo.json'")):
        export_final_gradebook(out)
    one, two = _shards(_copy(graded[1], tmp_path / "genuine"), tmp_path / "shards")
    result_path(one, "ada").replace(result_path(two, "bo"))
    write_shard_file(one, (1, 2), [])
    with pytest.raises(KitError, match="holds 'ada''s record, not 'bo''s"):
        merge([one, two], tmp_path / "merged", emit=lambda line: None)


@pytest.mark.slow
def test_a_stray_in_a_shards_results_is_refused_by_merge(graded, tmp_path):
    one, two = _shards(graded[1], tmp_path)
    shutil.copyfile(result_path(one, "ada"), one / "results" / "ada-copy.json")
    with pytest.raises(KitError, match="merge refused") as refused:
        merge([one, two], tmp_path / "merged", emit=lambda line: None)
    assert f"{MISPLACED}: {str(one / 'results' / 'ada-copy.json')!a}" in str(refused.value)


@pytest.mark.slow
def test_resume_regrades_a_swapped_record_and_names_a_stray(graded, tmp_path):
    class_dir, out, results = graded
    out = _copy(out, tmp_path / "out")
    ada = result_path(out, "ada").read_bytes()
    result_path(out, "bo").write_bytes(ada)  # ada's sealed record as bo's: bo would get full marks
    (out / "results" / "0-forged.json").write_bytes(ada)
    said = []
    again = {r.student: r for r in grade_class(class_dir, out, resume=True, jobs=1, skip_notebook=True,
                                               emit=said.append)}
    assert any("--resume: 1 student(s) unchanged" in line for line in said), said
    assert any("regrading 1 record(s)" in line and line.endswith(": 'bo'") for line in said), said
    assert any(line.startswith("WARNING") and line.endswith("remove them): '0-forged.json'") for line in said), said
    assert {student: r.score for student, r in again.items()} == {"ada": results["ada"].score, "bo": 0}
    assert result_path(out, "ada").read_bytes() == ada and (out / "results" / "0-forged.json").read_bytes() == ada
    regraded, problem = load_record(result_path(out, "bo"))
    assert (regraded.student, regraded.score, problem) == ("bo", 0, "")


def test_the_seal_binds_the_student_and_the_file_name(tmp_path):
    record = SubmissionResult("ada", (TestResult("t", "g", 1.0, 1.0, "passed"),), fingerprint="f")
    save(record, tmp_path / "ada.json")
    data = json.loads((tmp_path / "ada.json").read_text())
    assert seals.is_sealed(data, "ada.json") and not seals.is_sealed(data, "bo.json")
    data["extra_data"]["student"] = "bo"  # the same grade claimed for a classmate
    assert not seals.is_sealed(data, "bo.json")
    save(record, tmp_path / "bo.json")  # sealed, but for a file its student's id does not give
    assert load_record(tmp_path / "bo.json") == (record, MISPLACED)
    (tmp_path / "link").mkdir()
    (tmp_path / "link" / "ada.json").symlink_to(tmp_path / "ada.json")
    assert load_record(tmp_path / "link" / "ada.json") == (None, MISPLACED)
    assert load_record(tmp_path / "ada.json") == (record, "")
    shutil.copyfile(tmp_path / "bo.json", tmp_path / "ada.json")  # ada's record, sealed for the name bo.json
    assert load_record(tmp_path / "ada.json") == (record, FORGED)


@pytest.mark.parametrize("module", ["judge/ahead.py", "sandbox/clocks.py"])
def test_a_change_to_any_grading_module_changes_the_fingerprint(module, tmp_path):
    """The fingerprint of a copy of the engine's grading code, before and after an edit of one module of the copy
    (the kit's own source is never touched)."""
    copy = tmp_path / "autograder"
    for path in fingerprints.grading_code():
        (copy / path.relative_to(ENGINE)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, copy / path.relative_to(ENGINE))
    inputs = LESSON.grading_inputs()
    before = FINGERPRINT(inputs, engine=copy)
    (copy / module).write_text((copy / module).read_text() + "\n# an edit\n")
    assert FINGERPRINT(inputs, engine=copy) != before


def _imports(path: Path) -> set[str]:
    """The ``autograder`` modules ``path`` imports, lazily too, as dotted names (each ``from`` name as a module
    too: it may be one)."""
    package = ".".join(path.relative_to(ENGINE.parent).with_suffix("").parts[:-1])
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return {name for name in names if name.split(".")[0] == "autograder"}


def _module_file(name: str) -> Path | None:
    base = ENGINE.parent.joinpath(*name.split("."))
    return next((path for path in (base / "__init__.py", base.with_suffix(".py")) if path.is_file()), None)


def test_the_fingerprint_covers_every_module_the_judge_and_the_worker_import():
    roots = ["judge/grade.py", "worker/main.py", "notebook/stage.py", "commands/judge_loop.py",
             "commands/judge_pool.py", "commands/planning.py"]
    reached, todo = set(), [ENGINE / root for root in roots]
    while todo:
        path = todo.pop()
        if path not in reached:
            reached.add(path)
            for name in _imports(path):
                parts = name.split(".")
                todo += [found for i in range(1, len(parts) + 1) if (found := _module_file(".".join(parts[:i])))]
    hashed = set(fingerprints.grading_code())
    assert {ENGINE / "judge/ahead.py", ENGINE / "sandbox/clocks.py", ENGINE / "judge/grade.py"} <= reached
    assert sorted(path.relative_to(ENGINE).as_posix() for path in reached - hashed) == []
    assert not {path.relative_to(ENGINE).parts[0] for path in hashed} & {"reports", "lessons", "cli.py"}
