"""``return-feedback``: each student's feedback pushed to a branch of their own remote, with real git and local
bare repositories; a student's ``.git`` never runs anything on the grading machine."""

import json
import os
import stat
import subprocess

import pytest

from autograder.cli import main
from autograder.commands.feedback_git import TRAILER
from autograder.commands.return_feedback import return_feedback
from autograder.errors import KitError
from autograder.intake.naming import result_path
from autograder.records.handin import Handin
from autograder.records.results import SubmissionResult, TestResult, save
from autograder.reports import write_student_reports

ENV = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_AUTHOR_NAME": "t",
       "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}


def git(*args, cwd=None):
    return subprocess.run(["git", *args], cwd=cwd, env=ENV, check=True, capture_output=True).stdout


def _record(student, score, folder=""):
    tests = (TestResult(name="shapes", group="code", score=score, max_score=2.0,
                        status="passed" if score == 2.0 else "failed"),)
    return SubmissionResult(student=student, tests=tests, handin=Handin(folder=folder) if folder else None)


def _grade(out, results):
    for result in results:
        save(result, result_path(out, result.student))
        write_student_reports(result, out)


def _bare(root, name):
    path = root / "remotes" / f"{name}.git"
    git("init", "--quiet", "--bare", str(path))
    return path


def _clone(class_dir, name, url=None):
    folder = class_dir / name
    git("init", "--quiet", str(folder))
    if url is not None:
        git("-C", str(folder), "config", "remote.origin.url", str(url))
    return folder


def _branch_file(remote, name, branch="feedback"):
    return subprocess.run(["git", f"--git-dir={remote}", "show", f"{branch}:{name}"], env=ENV, check=True,
                          capture_output=True).stdout


def _arm(folder, marker):
    """Every way a clone's .git could run a command if git ran in it: a hook, fsmonitor, a credential helper,
    an ssh command, an included file, a receive-pack override."""
    hook = folder / ".git" / "hooks" / "pre-push"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)
    (folder / ".git" / "extra").write_text(f"[core]\n\thooksPath = {hook.parent}\n")
    with (folder / ".git" / "config").open("a") as config:
        config.write(f"[core]\n\tfsmonitor = touch {marker}; false\n\tsshCommand = touch {marker}; ssh\n"
                     f"[credential]\n\thelper = !touch {marker}\n[include]\n\tpath = extra\n"
                     f"[remote \"origin\"]\n\treceivepack = touch {marker}; git-receive-pack\n")


@pytest.fixture
def term(tmp_path):
    """A graded class of five: ada and bo (bo's clone armed) have remotes; cy has no remote, dee's .git is a
    link, eve's origin is an ext:: command."""
    out, class_dir, marker = tmp_path / "out", tmp_path / "class", tmp_path / "MARKER"
    remotes = {name: _bare(tmp_path, name) for name in ("ada", "bo")}
    _clone(class_dir, "ada", remotes["ada"])
    _arm(_clone(class_dir, "bo", f"file://{remotes['bo']}"), marker)
    _clone(class_dir, "cy")
    (class_dir / "dee").mkdir()
    (class_dir / "dee" / ".git").symlink_to(class_dir / "ada" / ".git")
    _clone(class_dir, "eve", f"ext::sh -c touch% {marker}")
    _grade(out, [_record(name, score) for name, score in
                 (("ada", 2.0), ("bo", 1.0), ("cy", 0.0), ("dee", 0.0), ("eve", 2.0))])
    return out, class_dir, remotes, marker


def test_each_student_gets_their_own_feedback_and_the_rest_are_listed_with_reasons(term):
    out, class_dir, remotes, marker = term
    lines = []
    outcome = return_feedback(out, class_dir, emit=lines.append)

    assert outcome.returned == ("ada", "bo")
    for name, remote in remotes.items():
        assert _branch_file(remote, "FEEDBACK.md") == (out / "feedback" / f"{name}.md").read_bytes()
        assert _branch_file(remote, "FEEDBACK.txt") == (out / "feedback" / f"{name}.txt").read_bytes()
        assert git("--git-dir", str(remote), "ls-tree", "--name-only", "feedback").decode().split() == [
            "FEEDBACK.md", "FEEDBACK.txt"]  # the branch holds only the feedback
        assert git("--git-dir", str(remote), "rev-list", "--count", "feedback").strip() == b"1"
    assert outcome.not_returned == {
        "cy": "the clone has no remote 'origin'",
        "dee": ".git is a symbolic link (links are not followed)",
        "eve": f"remote URL 'ext::sh -c touch% {marker}' names a remote helper ('<transport>::'): refused, it can "
               f"run a command"}
    assert lines[-1] == ("returned to 2 of 5; not returned: cy (the clone has no remote 'origin'), dee (.git is a "
                         f"symbolic link (links are not followed)), eve ({outcome.not_returned['eve']})")
    assert not marker.exists(), "a student's .git ran a command on the grading machine"
    assert git("-C", str(class_dir / "ada"), "status", "--porcelain") == b"", "the clone's work tree untouched"
    assert not (class_dir / "ada" / ".git" / "refs" / "heads" / "feedback").exists()
    # The trap was armed: git run inside bo's clone would have run the student's command.
    subprocess.run(["git", "status"], cwd=class_dir / "bo", env=ENV, capture_output=True)
    assert marker.exists()


def test_a_second_run_after_a_regrade_replaces_the_branch(term):
    out, class_dir, remotes, _ = term
    return_feedback(out, class_dir, emit=lambda line: None)
    before = _branch_file(remotes["ada"], "FEEDBACK.md")
    _grade(out, [_record("ada", 0.0)])  # a regrade: ada's feedback changes
    assert (out / "feedback" / "ada.md").read_bytes() != before

    outcome = return_feedback(out, class_dir, emit=lambda line: None)

    assert outcome.returned == ("ada", "bo")
    assert _branch_file(remotes["ada"], "FEEDBACK.md") == (out / "feedback" / "ada.md").read_bytes()
    assert git("--git-dir", str(remotes["ada"]), "rev-list", "--count", "feedback").strip() == b"1"


def test_a_branch_the_kit_did_not_write_is_left_alone(tmp_path):
    """GitHub Classroom's feedback pull request uses a branch called feedback: never overwritten."""
    out, class_dir, remote = tmp_path / "out", tmp_path / "class", _bare(tmp_path, "ada")
    folder = _clone(class_dir, "ada", remote)
    (folder / "a.py").write_text("x = 1\n")
    git("-C", str(folder), "add", "a.py")
    git("-C", str(folder), "commit", "--quiet", "-m", "starter")
    git("-C", str(folder), "push", "--quiet", "origin", "HEAD:refs/heads/feedback")
    starter = git("--git-dir", str(remote), "rev-parse", "feedback")
    _grade(out, [_record("ada", 2.0)])

    outcome = return_feedback(out, class_dir, emit=lambda line: None)

    assert outcome.returned == () and outcome.not_returned["ada"].startswith(
        "its branch feedback holds commits the kit did not write")
    assert git("--git-dir", str(remote), "rev-parse", "feedback") == starter
    # Another branch name works, and its commit is marked as the kit's.
    assert return_feedback(out, class_dir, branch="grading/feedback", emit=lambda line: None).returned == ("ada",)
    assert TRAILER in git("--git-dir", str(remote), "log", "-1", "--format=%B", "grading/feedback").decode()


def test_a_roster_folder_is_found_and_a_dry_run_pushes_nothing(tmp_path):
    out, class_dir, remote = tmp_path / "out", tmp_path / "class", _bare(tmp_path, "ada")
    _clone(class_dir, "ada-lovelace-repo", remote)
    _grade(out, [_record("ada", 2.0, folder="ada-lovelace-repo")])
    lines = []

    outcome = return_feedback(out, class_dir, dry_run=True, emit=lines.append)

    assert outcome.returned == ("ada",)
    assert lines == [f"  ada: would push FEEDBACK.md, FEEDBACK.txt to {remote} branch feedback",
                     "dry run: would have returned to 1 of 1"]
    assert git("--git-dir", str(remote), "for-each-ref") == b""


def test_unsealed_records_refuse_the_run_before_anything_is_pushed(term):
    out, class_dir, remotes, _ = term
    path = result_path(out, "bo")
    data = json.loads(path.read_text())
    data["score"] = 2.0
    data["tests"][0]["score"] = 2.0
    path.write_text(json.dumps(data))  # edited after grading: its seal no longer matches

    with pytest.raises(KitError, match=r"^return-feedback refused records not sealed by this grader .*: 'bo'"):
        return_feedback(out, class_dir, emit=lambda line: None)
    assert all(git("--git-dir", str(remote), "for-each-ref") == b"" for remote in remotes.values())


@pytest.mark.parametrize("url, reason", [
    ("--upload-pack=touch x", "starts with '-'"),
    ("fd::3", "names a remote helper"),
    ("https://-oProxyCommand=x/y", "is not of a form the kit accepts"),
    ("ssh://-oProxyCommand=touch%20x/y", "is not of a form the kit accepts"),
    ("git@github.com:-x/y", "is not of a form the kit accepts"),
    ("https://github.com/o/r.git\n/evil", "holds a space or a control character"),
])
def test_unsafe_remote_urls_are_refused(url, reason):
    from autograder.commands.feedback_git import NotReturned, check_url

    with pytest.raises(NotReturned, match=reason):
        check_url(url)
    for safe in ("https://github.com/org/hw1-ada.git", "ssh://git@github.com/org/hw1-ada.git",
                 "git@github.com:org/hw1-ada.git"):
        assert check_url(safe) == safe


def test_a_local_remote_inside_the_class_folder_is_refused(tmp_path):
    """A bare repository a student handed in (with hooks of their own) is never pushed to."""
    out, class_dir = tmp_path / "out", tmp_path / "class"
    inside = class_dir / "ada" / "evil.git"
    git("init", "--quiet", "--bare", str(inside))
    _clone(class_dir, "ada", inside)
    _grade(out, [_record("ada", 2.0)])

    outcome = return_feedback(out, class_dir, emit=lambda line: None)

    assert outcome.not_returned == {"ada": f"remote '{inside}' is inside the class or output folder (a student's "
                                           f"own files)"}


def test_a_config_that_is_a_link_is_not_read(tmp_path):
    out, class_dir, remote = tmp_path / "out", tmp_path / "class", _bare(tmp_path, "ada")
    donor = _clone(tmp_path / "elsewhere", "donor", remote)
    folder = _clone(class_dir, "ada")
    (folder / ".git" / "config").unlink()
    (folder / ".git" / "config").symlink_to(donor / ".git" / "config")
    _grade(out, [_record("ada", 2.0)])

    outcome = return_feedback(out, class_dir, emit=lambda line: None)

    assert outcome.not_returned == {"ada": ".git/config is not a regular file (links are not followed)"}
    assert git("--git-dir", str(remote), "for-each-ref") == b""


def test_two_students_naming_one_remote_get_neither_feedback(tmp_path):
    """A clone's origin is the student's word: bo pointing his at ada's repository overwrites nothing of hers."""
    out, class_dir, remote = tmp_path / "out", tmp_path / "class", _bare(tmp_path, "ada")
    _clone(class_dir, "ada", remote)
    _clone(class_dir, "bo", f"file://{remote}/")
    _grade(out, [_record("ada", 2.0), _record("bo", 0.0)])

    outcome = return_feedback(out, class_dir, emit=lambda line: None)

    assert outcome.returned == ()
    assert outcome.not_returned == {"ada": "its remote is also that of bo: returned to none of them",
                                    "bo": "its remote is also that of ada: returned to none of them"}
    assert git("--git-dir", str(remote), "for-each-ref") == b""


def test_the_command_line(term, capsys):
    out, class_dir, remotes, _ = term
    assert main(["return-feedback", str(out), "--class", str(class_dir), "--branch", "feedback"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("returned to 2 of 5; not returned: cy ")
    assert _branch_file(remotes["bo"], "FEEDBACK.md") == (out / "feedback" / "bo.md").read_bytes()
