"""Records with provenance: every record is sealed by the judge's key and names how it was graded; ``--resume``
regrades, and ``merge`` and ``final-gradebook`` refuse, any record that is not a grade of record (forged after
grading, or graded without isolation). Also: grading fails closed where no sandbox works, and says why."""

import json
import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path

import pytest

from autograder.sandbox import isolation as sandboxes
from autograder.records import seal as seals
from autograder.errors import KitError
from autograder.commands.final_gradebook import export_final_gradebook
from autograder.commands.grading import grade_class
from autograder.commands.merge import merge
from autograder.lesson.catalogue import copy_package
from autograder.commands.planning import write_shard_file
from autograder.intake.naming import result_path
from autograder.records.results import FORGED, UNISOLATED, SubmissionResult, TestResult, load_record, refuse_untrusted, save
from lesson import MODULES, RELEASE, SOLUTIONS


def _record(student, score=1.0, sandbox="bwrap"):
    return SubmissionResult(student, (TestResult("t", "g", score, 1.0, "passed" if score else "failed"),),
                            sandbox=sandbox, fingerprint="f")


def _forge(path, edit):
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def test_a_record_is_sealed_and_any_edit_breaks_the_seal(tmp_path):
    path = tmp_path / "a.json"
    save(_record("a", 0.0), path)
    assert load_record(path) == (_record("a", 0.0), "")
    assert stat.S_IMODE(seals.key_path().stat().st_mode) == 0o600
    assert not seals.key_path().is_relative_to(tmp_path)  # outside every output folder

    def full_marks(data):
        data["tests"][0]["score"] = data["score"] = 1.0

    _forge(path, full_marks)
    assert load_record(path)[1] == FORGED
    # A record that claims bwrap, with no seal or with a seal of its own making.
    save(_record("b", 0.0), tmp_path / "b.json")
    _forge(tmp_path / "b.json", lambda data: data["extra_data"].pop(seals.FIELD))
    assert load_record(tmp_path / "b.json")[1] == FORGED
    _forge(tmp_path / "b.json", lambda data: data["extra_data"].update(seal="hmac-sha256:" + "0" * 64))
    assert load_record(tmp_path / "b.json")[1] == FORGED
    (tmp_path / "c.json").write_text("not json")
    assert load_record(tmp_path / "c.json") == (None, FORGED)
    save(_record("d", sandbox="none"), tmp_path / "d.json")
    assert load_record(tmp_path / "d.json")[1] == UNISOLATED


def test_another_key_does_not_vouch_and_the_environment_overrides_the_file(tmp_path, monkeypatch):
    save(_record("a"), tmp_path / "a.json")
    monkeypatch.setenv(seals.ENV, "another key, of another machine")
    assert load_record(tmp_path / "a.json")[1] == FORGED
    save(_record("a"), tmp_path / "a.json")
    assert load_record(tmp_path / "a.json")[1] == ""
    monkeypatch.setenv(seals.ENV, "short")
    with pytest.raises(KitError, match="too short"):
        save(_record("a"), tmp_path / "a.json")


def test_untrusted_records_are_refused_by_name():
    with pytest.raises(KitError, match="merge refused") as refused:
        refuse_untrusted({"ada": "", "bo": FORGED, "cy": UNISOLATED}, "merge")
    assert "'bo'" in str(refused.value) and "'cy'" in str(refused.value) and "'ada'" not in str(refused.value)
    assert "\n" not in str(refused.value)
    with pytest.raises(KitError, match="'bo'") as refused:
        refuse_untrusted({"bo": FORGED, "cy": UNISOLATED}, "merge", allow_unisolated=True)
    assert "'cy'" not in str(refused.value)
    refuse_untrusted({"ada": "", "cy": UNISOLATED}, "merge", allow_unisolated=True)


def _shard(folder, index, count, records):
    for record in records:
        save(record, result_path(folder, record.student))
    write_shard_file(folder, (index, count), [record.student for record in records])
    return folder


def test_merge_refuses_forged_and_unisolated_records(tmp_path):
    one = _shard(tmp_path / "one", 1, 2, [_record("ada", 0.0), _record("bo", 0.0)])
    two = _shard(tmp_path / "two", 2, 2, [_record("cy", 1.0, sandbox="none")])
    _forge(result_path(one, "bo"), lambda data: data["tests"][0].update(score=1.0))
    with pytest.raises(KitError, match="merge refused") as refused:
        merge([one, two], tmp_path / "merged", emit=lambda line: None)
    assert "'bo'" in str(refused.value) and "'cy'" in str(refused.value) and "'ada'" not in str(refused.value)
    assert not (tmp_path / "merged").exists()
    save(_record("bo", 0.0), result_path(one, "bo"))  # regraded
    with pytest.raises(KitError, match="allow-unisolated"):
        merge([one, two], tmp_path / "merged", emit=lambda line: None)
    merged = merge([one, two], tmp_path / "merged", emit=lambda line: None, allow_unisolated=True)
    assert {result.student: result.score for result in merged} == {"ada": 0.0, "bo": 0.0, "cy": 1.0}
    assert load_record(result_path(tmp_path / "merged", "ada"))[1] == ""


def test_final_gradebook_refuses_forged_records_and_seals_what_it_rewrites(tmp_path):
    out = tmp_path / "out"
    for record in (_record("ada", 0.0), _record("bo", 0.0), _record("cy", 1.0, sandbox="none")):
        save(record, result_path(out, record.student))
    before = result_path(out, "ada").read_text()
    _forge(result_path(out, "bo"), lambda data: data["extra_data"].update(sandbox="bwrap", seal="hmac-sha256:x"))
    with pytest.raises(KitError, match="final-gradebook refused") as refused:
        export_final_gradebook(out)
    assert "'bo'" in str(refused.value) and "'cy'" in str(refused.value)
    assert not (out / "final_gradebook.csv").exists() and result_path(out, "ada").read_text() == before
    result_path(out, "bo").unlink()
    with pytest.raises(KitError, match="'cy'"):
        export_final_gradebook(out)
    export_final_gradebook(out, allow_unisolated=True)
    assert (out / "final_gradebook.csv").exists()
    assert [load_record(result_path(out, student))[1] for student in ("ada", "cy")] == ["", UNISOLATED]


@pytest.mark.slow
def test_resume_regrades_what_is_not_a_grade_of_record(tmp_path):
    """After an unisolated run, or a process that rewrote the records, ``--resume`` keeps only sealed records
    graded in isolation."""
    try:
        sandboxes.choose_sandbox("isolated")
    except KitError as error:
        pytest.skip(f"needs a sandbox: {error}")
    class_dir, out = tmp_path / "class", tmp_path / "out"
    for student in ("edited", "claims-bwrap", "unisolated", "honest"):
        copy_package(RELEASE, class_dir / student, MODULES)
    copy_package(SOLUTIONS, class_dir / "honest", MODULES)
    first = {r.student: r for r in grade_class(class_dir, out, skip_notebook=True, emit=lambda line: None)}
    top = first["honest"].max_score
    assert first["honest"].score == top > 0 and first["edited"].score == 0

    def full_marks(data):
        for test in data["tests"]:
            test["score"] = test["max_score"]

    _forge(result_path(out, "edited"), full_marks)
    _forge(result_path(out, "claims-bwrap"), lambda data: (full_marks(data), data["extra_data"].pop("seal")))
    save(first["unisolated"].__class__(**{**first["unisolated"].__dict__, "sandbox": "none"}),
         result_path(out, "unisolated"))
    said = []
    again = {r.student: r for r in grade_class(class_dir, out, resume=True, skip_notebook=True, emit=said.append)}
    assert any("--resume: 1 student(s) unchanged" in line for line in said), said
    assert any("regrading 3 record(s)" in line for line in said), said
    assert {student: result.score for student, result in again.items()} == \
        {"edited": 0, "claims-bwrap": 0, "unisolated": 0, "honest": top}
    for student in again:
        assert load_record(result_path(out, student))[1] == "", student


def test_unreadable_runtime_is_named_with_its_fix(monkeypatch):
    base = Path(tempfile.mkdtemp(prefix="kit-runtime-"))  # under /tmp: every folder above it passable
    base.chmod(0o755)
    monkeypatch.setattr(sys, "prefix", sys.prefix)
    monkeypatch.setattr(sys, "executable", sys.executable)
    try:
        _runtime_problem_named(base, monkeypatch)
    finally:
        shutil.rmtree(base)


def _runtime_problem_named(tmp_path, monkeypatch):
    closed = tmp_path / "home"
    runtime = closed / ".pyenv" / "versions" / "3.11.7"
    (runtime / "bin").mkdir(parents=True)
    closed.chmod(0o700)
    monkeypatch.setattr(sys, "base_prefix", str(runtime))
    monkeypatch.setattr(sys, "prefix", str(runtime))
    monkeypatch.setattr(sys, "executable", str(runtime / "bin" / "python3"))
    problem = sandboxes.runtime_problem()
    assert f"the Python runtime under {runtime} is not readable by an unprivileged user" in problem
    assert f"({closed} is mode 0700)" in problem and "rm -rf .venv && make PYTHON=" in problem
    python = sandboxes.system_python()
    if python:  # the distribution's own Python, readable by everyone
        assert f"make PYTHON={python}" in problem and sandboxes._closed_ancestor(python) is None
    if os.geteuid() == 0:  # root: the confined mode reports this cause, not an import error
        assert sandboxes._uid_problem(sandboxes.Limits(), 1)[0] == problem
    closed.chmod(0o755)
    assert sandboxes.runtime_problem() is None


def test_user_namespaces_refused_is_said_in_words(monkeypatch):
    monkeypatch.setattr(sandboxes.shutil, "which", lambda name: "/usr/bin/bwrap")
    monkeypatch.setattr(sandboxes, "_trial", lambda sandbox: "bwrap: setting up uid map: Permission denied")
    assert "user namespaces are refused here" in sandboxes._bwrap_problem(sandboxes.Limits(), 1)


@pytest.mark.slow
def test_the_demo_says_its_scores_were_graded_unisolated(tmp_path, monkeypatch):
    from autograder.commands import demo

    def fake_grade(class_dir, out, **options):
        assert options["unisolated_ok"] is True
        out.mkdir(parents=True)
        (out / "gradebook.csv").write_text("student,score\nreference,1\n")
        return [_record("reference", sandbox="none")]

    monkeypatch.setattr(demo, "grade_class", fake_grade)
    monkeypatch.setattr(demo, "lesson_figures", lambda assignment, to: [])
    said = []
    demo.run_demo(tmp_path, emit=said.append)
    shown = said.index("student,score\nreference,1")
    assert said[shown - 1].startswith("SANDBOX OFF")
