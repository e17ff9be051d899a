"""Who handed in what (issue 55): the roster, the commit at the deadline and the late policy, the copy of the
files graded, and every odd hand-in flagged; on real git repositories the tests build."""

import json
import os
import shutil
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import pytest

from autograder.commands.grading import grade_class
from autograder.errors import KitError
from autograder.intake import git_commit
from autograder.intake.deadlines import Deadlines, LatePolicy, load_extensions, parse_time
from autograder.intake.roster import alike_groups, key, load_roster, match
from autograder.intake.submission import Refused, read_submission
from autograder.intake.stubs import stub_files
from autograder.records import triage
from autograder.records.results import load
from autograder.reports.feedback import render
from lesson import CONTRACT, MODULES, RELEASE, SOLUTIONS

DEADLINE = "2026-12-01T23:59:00+00:00"
GIT = ["git", "-c", "user.name=Student", "-c", "user.email=s@example.org", "-c", "init.defaultBranch=main"]


def commit(repo: Path, when: str, message: str = "work") -> str:
    env = dict(os.environ, GIT_COMMITTER_DATE=when, GIT_AUTHOR_DATE=when)
    subprocess.run([*GIT, "-C", str(repo), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(repo), "commit", "-qm", message], check=True, env=env)
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


def clone_with(folder: Path, package: Path, when: str, layout=("assignments", "mha_pe")) -> str:
    """A Classroom-like clone: the released stubs committed first (in the template's folder), then
    ``package``'s files at ``when`` in the folder ``layout`` names."""
    subprocess.run([*GIT, "init", "-q", str(folder)], check=True)
    starter = folder / "assignments" / "mha_pe"
    starter.mkdir(parents=True)
    for module in MODULES:
        shutil.copyfile(RELEASE / f"{module}.py", starter / f"{module}.py")
    commit(folder, "2026-11-20T10:00:00+00:00", "starter")
    target = folder.joinpath(*layout)
    for module in MODULES:
        shutil.copyfile(package / f"{module}.py", target / f"{module}.py")
    return commit(folder, when)


# --- the roster ---

def test_a_classroom_roster_and_a_plain_list_of_ids_are_read(tmp_path):
    classroom = tmp_path / "classroom_roster.csv"
    classroom.write_text("identifier,github_username,github_id,name\nA123,ada-l,1,Ada\n,bo,2,Bo\n")
    roster = load_roster(classroom)
    assert roster.ids == ("A123", "bo") and roster.aliases == {"ada-l": "A123"} and roster.names["A123"] == "Ada"
    plain = tmp_path / "ids.csv"
    plain.write_text("ada\nbo\n\n")
    assert load_roster(plain).ids == ("ada", "bo")


@pytest.mark.parametrize("text, words", [("", "no students"), ("ada\nada\n", "listed twice"),
                                         ("identifier,name\n,x\n", "no students")])
def test_a_bad_roster_is_one_line(tmp_path, text, words):
    path = tmp_path / "roster.csv"
    path.write_text(text)
    with pytest.raises(KitError, match=words) as raised:
        load_roster(path)
    assert "\n" not in str(raised.value)
    with pytest.raises(KitError, match="roster"):
        load_roster(tmp_path / "absent.csv")


def test_folders_match_by_name_suffix_and_look_alike_and_strangers_stay_themselves(tmp_path):
    path = tmp_path / "roster.csv"
    path.write_text("identifier,github_username\njdoe,jdoe\nS1,ada-l\n")
    found = {item.folder_id: (item.student, item.how) for item in match(
        ["jdoe", "jdoe (1)", "JDoe ", "jdое", "mha-pe-ada-l", "stranger"], load_roster(path))}
    assert found == {"jdoe": ("jdoe", "exact"), "jdoe (1)": ("jdoe", "alike"), "JDoe ": ("jdoe", "alike"),
                     "jdое": ("jdoe", "alike"), "mha-pe-ada-l": ("S1", "suffix"), "stranger": ("stranger", "unknown")}


def test_look_alike_ids_are_grouped_and_numbered_ids_are_not():
    assert key("jdoe (1)") == key(" JDoe") == key("jdое") == "jdoe"
    assert alike_groups(["jdoe", "jdoe (1)", "s001", "s002", "student1", "student2"]) == {
        "jdoe": ("jdoe (1)",), "jdoe (1)": ("jdoe",)}


# --- deadlines ---

def test_times_need_a_zone_and_lateness_counts_started_days_after_grace():
    with pytest.raises(KitError, match="time zone"):
        parse_time("2026-12-01T23:59:00")
    with pytest.raises(KitError, match="ISO 8601"):
        parse_time("Dec 1")
    due = parse_time(DEADLINE)
    policy = LatePolicy(per_day=10, cap=25, grace_minutes=15)
    assert policy.days_late(parse_time("2026-12-02T00:10:00+00:00"), due) == 0  # in the grace period
    assert policy.days_late(parse_time("2026-12-02T00:20:00+00:00"), due) == 1
    assert policy.days_late(parse_time("2026-12-04T00:00:00+00:00"), due) == 3
    assert [policy.percent(days) for days in (0, 1, 2, 3)] == [0, 10, 20, 25]
    with pytest.raises(KitError, match="late-cap"):
        LatePolicy(cap=150)


def test_extensions_give_a_deadline_or_days(tmp_path):
    path = tmp_path / "ext.csv"
    path.write_text("student,deadline,days\nada,2026-12-03T12:00:00+01:00,\nbo,,2\n")
    due = parse_time(DEADLINE)
    assert load_extensions(path, due) == {"ada": datetime(2026, 12, 3, 11, tzinfo=timezone.utc),
                                          "bo": datetime(2026, 12, 3, 23, 59, tzinfo=timezone.utc)}
    path.write_text("student,days\ncy,soon\n")
    with pytest.raises(KitError, match="line 2"):
        load_extensions(path, due)


# --- the commit at the deadline, read as data ---

def test_the_last_commit_by_the_deadline_is_chosen_and_later_ones_counted(tmp_path):
    repo = tmp_path / "ada"
    on_time = clone_with(repo, SOLUTIONS, "2026-12-01T20:00:00+00:00")
    (repo / "notes.txt").write_text("after")
    commit(repo, "2026-12-02T09:00:00+00:00")
    commit_ = git_commit.commit_at(repo, parse_time(DEADLINE))
    assert (commit_.sha, commit_.later, commit_.reordered) == (on_time, 1, False)
    target = tmp_path / "snapshot"
    git_commit.write_commit(repo, commit_.sha, target)
    assert sorted(path.name for path in target.rglob("*.py")) == sorted(f"{module}.py" for module in MODULES)
    assert (target / "assignments" / "mha_pe" / "heads.py").read_bytes() == (SOLUTIONS / "heads.py").read_bytes()
    assert not (target / "notes.txt").exists()  # only what intake reads


def test_a_history_whose_times_run_backwards_is_flagged(tmp_path):
    repo = tmp_path / "bo"
    clone_with(repo, SOLUTIONS, "2026-11-25T10:00:00+00:00")
    (repo / "late.txt").write_text("backdated")
    commit(repo, "2026-11-21T10:00:00+00:00")  # committed after, dated before its parent
    assert git_commit.commit_at(repo, parse_time(DEADLINE)).reordered is True


def test_reading_a_clone_runs_none_of_its_hooks_or_configured_commands(tmp_path):
    repo = tmp_path / "mallory"
    clone_with(repo, SOLUTIONS, "2026-12-01T10:00:00+00:00")
    marker = tmp_path / "ran"
    script = f"#!/bin/sh\ntouch {marker}\n"
    for hook in ("post-checkout", "reference-transaction", "pre-auto-gc", "post-index-change"):
        (repo / ".git" / "hooks" / hook).write_text(script)
        (repo / ".git" / "hooks" / hook).chmod(0o755)
    with open(repo / ".git" / "config", "a") as config:
        config.write(f"[core]\n\tfsmonitor = touch {marker}\n\tpager = touch {marker}\n"
                     f"[diff]\n\texternal = touch {marker}\n[alias]\n\tlog = !touch {marker}\n")
    graded = git_commit.commit_at(repo, parse_time(DEADLINE))
    git_commit.write_commit(repo, graded.sha, tmp_path / "snapshot")
    assert not marker.exists()


def test_a_dot_git_that_is_a_link_a_file_or_borrows_objects_is_refused(tmp_path):
    real = tmp_path / "real"
    clone_with(real, SOLUTIONS, "2026-12-01T10:00:00+00:00")
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / ".git").symlink_to(real / ".git")
    pointer = tmp_path / "pointer"
    pointer.mkdir()
    (pointer / ".git").write_text(f"gitdir: {real / '.git'}\n")
    borrower = tmp_path / "borrower"
    clone_with(borrower, SOLUTIONS, "2026-12-01T10:00:00+00:00")
    (borrower / ".git" / "objects" / "info" / "alternates").write_text(str(real / ".git" / "objects"))
    for folder, words in ((linked, "symbolic link"), (pointer, "not a folder"), (borrower, "borrows objects")):
        with pytest.raises(Refused, match=words):
            git_commit.commit_at(folder, parse_time(DEADLINE))


# --- which copy is graded ---

def test_the_students_work_is_graded_over_stubs_left_in_the_starter_folder(tmp_path):
    folder = tmp_path / "two-copies"
    (folder / "assignments" / "mha_pe").mkdir(parents=True)
    for module in MODULES:
        shutil.copyfile(RELEASE / f"{module}.py", folder / "assignments" / "mha_pe" / f"{module}.py")
        shutil.copyfile(SOLUTIONS / f"{module}.py", folder / f"{module}.py")
    stubs = stub_files(RELEASE, MODULES)
    intake = read_submission(folder, CONTRACT, stubs=stubs)
    assert intake.layout == "." and intake.files["heads.py".removesuffix(".py")] == (SOLUTIONS / "heads.py").read_bytes()
    assert sorted((copy.path, copy.same, copy.stub) for copy in intake.elsewhere) == [
        (f"assignments/mha_pe/{module}.py", False, True) for module in sorted(MODULES)]
    # Without the stubs to compare, the repository's layout is read first, as before.
    assert read_submission(folder, CONTRACT).layout == "assignments/mha_pe"


# --- a class, end to end ---

@pytest.fixture(scope="module")
def term(tmp_path_factory):
    root = tmp_path_factory.mktemp("handins")
    class_dir = root / "class"
    class_dir.mkdir()
    shas = {"ada": clone_with(class_dir / "ada", SOLUTIONS, "2026-12-01T20:00:00+00:00"),
            "late": clone_with(class_dir / "late", SOLUTIONS, "2026-12-03T10:00:00+00:00"),
            "ext": clone_with(class_dir / "ext", SOLUTIONS, "2026-12-02T10:00:00+00:00"),
            "two": clone_with(class_dir / "two", SOLUTIONS, "2026-12-01T10:00:00+00:00", layout=())}
    (class_dir / "ada" / "scratch.txt").write_text("after the deadline")
    commit(class_dir / "ada", "2026-12-20T10:00:00+00:00")  # after the late window
    shutil.copytree(class_dir / "ada", class_dir / "ada (1)")
    (class_dir / "stubs-only").mkdir()
    for module in MODULES:
        shutil.copyfile(RELEASE / f"{module}.py", class_dir / "stubs-only" / f"{module}.py")
    roster = root / "roster.csv"
    roster.write_text("identifier,github_username\nada,ada\nlate,late\next,ext\ntwo,two\nstubs-only,stubs-only\n"
                      "missing,missing\n")
    extensions = root / "ext.csv"
    extensions.write_text("student,days\next,2\n")
    deadlines = Deadlines(parse_time(DEADLINE), load_extensions(extensions, parse_time(DEADLINE)),
                          LatePolicy(per_day=10, cap=50, grace_minutes=10, until_days=7))
    out = root / "out"
    lines = []
    results = grade_class(class_dir, out, skip_notebook=True, emit=lines.append, roster=load_roster(roster),
                          deadlines=deadlines)
    return {"out": out, "results": {result.student: result for result in results}, "shas": shas,
            "lines": lines, "class": class_dir, "roster": load_roster(roster), "deadlines": deadlines}


@pytest.mark.slow
def test_every_roster_student_has_one_record_and_the_odd_ones_are_flagged(term):
    results = term["results"]
    assert sorted(results) == ["ada", "ext", "late", "missing", "stubs-only", "two"]  # 'ada (1)' not graded twice
    flags = {item.student: [reason.kind for reason in item.reasons] for item in triage.needs_a_look(results.values())}
    assert flags == {"missing": ["no_submission"], "ada": ["second_folder", "later_commit"],
                     "late": ["late"], "stubs-only": ["commit", "stubs", "zero"], "two": ["files_elsewhere"]}
    assert results["ada"].handin.also == ("ada (1)",)
    top = results["ada"].max_score
    assert {student: result.score for student, result in results.items()} == {
        "ada": top, "ext": top, "late": round(top * 0.8, 6), "missing": 0, "stubs-only": 0, "two": top}


@pytest.mark.slow
def test_each_record_keeps_the_commit_graded_and_its_lateness(term):
    results, shas = term["results"], term["shas"]
    assert {student: results[student].handin.commit.sha for student in shas} == shas
    late = results["late"]
    assert (late.handin.late_days, late.handin.late_percent, late.penalty) == (2, 20.0, round(late.max_score * 0.2, 6))
    assert results["ext"].handin.commit.deadline == "2026-12-03T23:59:00+00:00" and results["ext"].handin.late_days == 0
    assert results["ada"].handin.commit.later == 1
    saved = json.loads((term["out"] / "results" / "late.json").read_text())
    assert saved["score"] == late.score and saved["extra_data"]["handin"]["commit"]["sha"] == shas["late"]
    assert load(term["out"] / "results" / "late.json").handin == late.handin


@pytest.mark.slow
def test_the_gradebook_and_feedback_show_the_commit_and_the_penalty(term):
    out, late = term["out"], term["results"]["late"]
    row = next(line for line in (out / "gradebook.csv").read_text().splitlines() if line.startswith("late,"))
    assert row.endswith(f",{term['shas']['late']},2026-12-03T10:00:00+00:00,2,{late.penalty:g}")
    text = render(late)
    assert f"late penalty of {late.penalty:g} included" in text and r"Late by 2 day\(s\): 20% of the maximum" in text
    assert "Late by 2 day(s): 20% of the maximum" in (out / "feedback" / "late.txt").read_text()
    assert "No submission was found" in render(term["results"]["missing"])


@pytest.mark.slow
def test_regrading_one_student_keeps_everyone_else(term):
    before = {path.name: path.read_bytes() for path in (term["out"] / "results").iterdir()}
    lines = []
    grade_class(term["class"], term["out"], skip_notebook=True, emit=lines.append, roster=term["roster"],
                deadlines=term["deadlines"], resume=True, regrade=["late"])
    after = {path.name: path.read_bytes() for path in (term["out"] / "results").iterdir()}
    assert [name for name in before if before[name] != after[name]] == ["late.json"]
    assert any("5 student(s) unchanged" in line for line in lines)
    with pytest.raises(KitError, match="not a student of this class: 'nobody'"):
        grade_class(term["class"], term["out"], skip_notebook=True, roster=term["roster"], regrade=["nobody"])


@pytest.mark.slow
def test_without_a_roster_look_alike_folders_are_both_graded_and_flagged(tmp_path):
    class_dir = tmp_path / "class"
    for name in ("jdoe", "jdoe (1)"):
        (class_dir / name).mkdir(parents=True)
        for module in MODULES:
            shutil.copyfile(SOLUTIONS / f"{module}.py", class_dir / name / f"{module}.py")
    results = {result.student: result for result in grade_class(class_dir, tmp_path / "out", skip_notebook=True,
                                                                 emit=lambda line: None)}
    assert {student: result.handin.alike for student, result in results.items()} == {
        "jdoe": ("jdoe (1)",), "jdoe (1)": ("jdoe",)}
    assert [str(reason) for reason in triage.reasons(results["jdoe"])] == [
        "an id that looks like another's: 'jdoe (1)': the same student?"]


@pytest.mark.slow
def test_a_grader_error_on_one_repository_is_that_students_record_and_the_class_goes_on(tmp_path, monkeypatch):
    class_dir = tmp_path / "class"
    clone_with(class_dir / "ada", SOLUTIONS, "2026-12-01T10:00:00+00:00")
    clone_with(class_dir / "bo", SOLUTIONS, "2026-12-01T10:00:00+00:00")
    real = git_commit.commit_at

    def breaks_on_bo(folder, last):
        if Path(folder).name == "bo":
            raise ValueError("a value from the repository the grader did not expect")
        return real(folder, last)

    monkeypatch.setattr(git_commit, "commit_at", breaks_on_bo)
    results = {result.student: result for result in grade_class(
        class_dir, tmp_path / "out", skip_notebook=True, emit=lambda line: None,
        deadlines=Deadlines(parse_time(DEADLINE)))}
    assert results["ada"].score == results["ada"].max_score and results["bo"].score == 0
    assert [str(reason) for reason in triage.reasons(results["bo"])][0] == (
        "commit: the repository could not be read: the grader's error (ValueError)")
