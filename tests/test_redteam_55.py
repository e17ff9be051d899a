"""Red team on hand-ins (issue 55): a clone's .git, commit times, tree shapes and folder names written by a
student who has read the kit. Each test is an attack that worked before its fix."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from autograder.commands.handins import at_deadlines
from autograder.intake import git_commit
from autograder.intake.deadlines import Deadlines, parse_time
from autograder.intake.roster import Roster, match
from autograder.intake.submission import Refused
from autograder.records.handin import Handin

DEADLINE = parse_time("2026-12-01T23:59:00+00:00")
GIT = ["git", "-c", "user.name=Student", "-c", "user.email=s@example.org", "-c", "init.defaultBranch=main"]


def repo(folder: Path, files: dict[str, bytes], when: str = "2026-11-30T10:00:00+00:00") -> str:
    """``folder`` made a clone (if it is not one yet) with ``files`` committed at ``when``; the commit's hash."""
    if not (folder / ".git").exists():
        subprocess.run([*GIT, "init", "-q", str(folder)], check=True)
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    env = dict(os.environ, GIT_COMMITTER_DATE=when, GIT_AUTHOR_DATE=when)
    subprocess.run([*GIT, "-C", str(folder), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(folder), "commit", "-qm", "work"], check=True, env=env)
    return rev(folder, "HEAD")


def rev(folder: Path, what: str) -> str:
    return subprocess.run(["git", "-C", str(folder), "rev-parse", what], capture_output=True, text=True,
                          check=True).stdout.strip()


def rewrite_head(folder: Path, edit) -> str:
    """HEAD's commit rewritten by ``edit`` (bytes -> bytes) as a hand-made object, the branch moved to it."""
    body = subprocess.run(["git", "-C", str(folder), "cat-file", "commit", "HEAD"], capture_output=True,
                          check=True).stdout
    sha = subprocess.run(["git", "-C", str(folder), "hash-object", "--literally", "-t", "commit", "-w", "--stdin"],
                         input=edit(body), capture_output=True, check=True).stdout.decode().strip()
    subprocess.run(["git", "-C", str(folder), "update-ref", "refs/heads/main", sha], check=True)
    return sha


def committer_time(stamp: str):
    return lambda body: re.sub(rb"(committer [^>]*> )\S+", rb"\g<1>" + stamp.encode(), body)


def snapshot(folder: Path, out: Path) -> dict[str, bytes]:
    graded = git_commit.commit_at(folder, DEADLINE)
    git_commit.write_commit(folder, graded.sha, out)
    return {path.relative_to(out).as_posix(): path.read_bytes() for path in sorted(out.rglob("*")) if path.is_file()}


# --- configuration that runs a command: git never opens the student's .git as its repository ---

def test_a_signed_commit_with_log_show_signature_runs_no_gpg_program_of_the_clone(tmp_path):
    mallory = tmp_path / "mallory"
    repo(mallory, {"heads.py": b"mine\n"})
    marker = tmp_path / "ran"
    evil = mallory / ".git" / "evil"
    evil.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    evil.chmod(0o755)
    with open(mallory / ".git" / "config", "a") as config:  # gpg.program is run from git's working folder
        config.write("[log]\n\tshowSignature = true\n[gpg]\n\tprogram = ./evil\n")
    signature = b"gpgsig -----BEGIN PGP SIGNATURE-----\n \n abc\n -----END PGP SIGNATURE-----\n"
    rewrite_head(mallory, lambda body: body.replace(b"\n\n", b"\n" + signature + b"\n", 1))
    assert snapshot(mallory, tmp_path / "out") == {"heads.py": b"mine\n"}
    assert not marker.exists()


def test_a_promisor_remote_fetching_a_missing_object_runs_no_upload_pack_command(tmp_path):
    mallory = tmp_path / "mallory"
    repo(mallory, {"heads.py": b"mine\n"})
    blob = rev(mallory, "HEAD:heads.py")
    os.remove(mallory / ".git" / "objects" / blob[:2] / blob[2:])
    marker = tmp_path / "ran"
    with open(mallory / ".git" / "config", "a") as config:
        config.write(f"[core]\n\trepositoryformatversion = 1\n[extensions]\n\tpartialClone = origin\n"
                     f"[remote \"origin\"]\n\turl = {mallory}\n\tpromisor = true\n"
                     f"\tuploadpack = touch {marker}; git-upload-pack\n")
    files = snapshot(mallory, tmp_path / "out")
    assert not marker.exists()
    # The missing blob is written as a file over intake's cap, which intake refuses: nothing of anyone else's.
    assert list(files) == ["heads.py"] and len(files["heads.py"]) == git_commit.MAX_FILE_BYTES + 1


# --- another student's repository, named from inside the clone's .git ---

def test_commondir_does_not_lend_a_classmates_repository(tmp_path):
    repo(tmp_path / "victim", {"heads.py": b"VICTIM WORK\n"})
    mallory = tmp_path / "mallory"
    repo(mallory, {"heads.py": b"mine\n"})
    (mallory / ".git" / "commondir").write_text("../../victim/.git\n")
    assert snapshot(mallory, tmp_path / "out") == {"heads.py": b"mine\n"}


@pytest.mark.parametrize("linked, words", [("objects", ".git/objects is not a folder"),
                                           ("objects/pack", ".git/objects holds a link or a special file"),
                                           ("refs/heads/main", ".git/refs/heads/main: it is a symbolic link"),
                                           ("HEAD", ".git/HEAD: it is a symbolic link")])
def test_links_inside_dot_git_to_a_classmates_repository_are_refused(tmp_path, linked, words):
    victim = tmp_path / "victim"
    repo(victim, {"heads.py": b"VICTIM WORK\n"})
    subprocess.run(["git", "-C", str(victim), "gc", "-q"], check=True)  # its objects in a pack
    mallory = tmp_path / "mallory"
    repo(mallory, {"heads.py": b"mine\n"})
    (mallory / ".git" / "refs" / "heads" / "main").write_text(rev(victim, "HEAD") + "\n")  # the victim's commit
    if linked != "objects/pack":  # the pack's objects reach git through the link below, or through these
        shutil.copytree(victim / ".git" / "objects" / "pack", mallory / ".git" / "objects" / "pack",
                        dirs_exist_ok=True)
    target = mallory / ".git" / linked
    shutil.rmtree(target) if target.is_dir() else target.unlink()
    target.symlink_to(victim / ".git" / linked)
    with pytest.raises(Refused, match=re.escape(words)):
        git_commit.commit_at(mallory, DEADLINE)


# --- commit times that crashed the whole class ---

def hand_in(tmp_path: Path, student: str) -> Handin:
    """The hand-in ``at_deadlines`` finds for the clone ``tmp_path/class/student`` (no grading)."""
    _, handins = at_deadlines([(student, tmp_path / "class" / student)], {student: Handin()}, tmp_path / "out",
                              Deadlines(DEADLINE), emit=lambda line: None)
    return handins[student]


def test_a_commit_whose_time_git_cannot_read_is_the_students_problem_not_a_crash(tmp_path):
    mallory = tmp_path / "class" / "mallory"
    repo(mallory, {"heads.py": b"first\n"})
    repo(mallory, {"heads.py": b"second\n"}, "2026-11-30T12:00:00+00:00")
    sha = rewrite_head(mallory, committer_time("abc"))  # git prints no %ct: the pairs of hash and time slid
    assert hand_in(tmp_path, "mallory").commit.problem == (
        f"the repository could not be read: commit {sha[:12]} has no time git can read")


def test_a_time_past_the_year_9999_on_an_earlier_commit_is_not_a_crash(tmp_path):
    mallory = tmp_path / "class" / "mallory"
    repo(mallory, {"heads.py": b"one\n", "sub/heads.py": b"copy\n"})
    repo(mallory, {"sub/heads.py": b"copy 2\n"}, "2026-11-30T12:00:00+00:00")
    rewrite_head(mallory, committer_time("9999999999999999999"))  # the copy's last change, dated beyond time_t
    graded = repo(mallory, {"notes.txt": b"x"}, "2026-11-30T13:00:00+00:00")
    handin = hand_in(tmp_path, "mallory")
    assert (handin.commit.sha, handin.commit.reordered, handin.commit.problem) == (graded, True, "")
    assert (tmp_path / "out" / "commits" / "mallory" / "sub" / "heads.py").read_bytes() == b"copy 2\n"


# --- shapes that cost the grading machine without bound ---

def test_thousands_of_same_named_files_cost_a_bounded_number_of_history_walks(tmp_path, monkeypatch):
    mallory = tmp_path / "mallory"
    repo(mallory, {f"d{index}/heads.py": b"x\n" for index in range(git_commit.MAX_DATED + 10)})
    calls = []
    real = git_commit.git
    monkeypatch.setattr(git_commit, "git", lambda *args, **kwargs: calls.append(args[1]) or real(*args, **kwargs))
    git_commit.write_commit(mallory, rev(mallory, "HEAD"), tmp_path / "out")
    assert calls == ["ls-tree", "cat-file", "log"] + ["log"] * git_commit.MAX_DATED


def test_a_tree_of_shared_subtrees_is_refused_before_its_listing_fills_memory(tmp_path, monkeypatch):
    bomb = tmp_path / "bomb"
    subprocess.run([*GIT, "init", "-q", str(bomb)], check=True)

    def plumbing(*args, data=b""):
        return subprocess.run(["git", "-C", str(bomb), *args], input=data, capture_output=True,
                              check=True).stdout.decode().strip()
    tree = plumbing("mktree", data=f"100644 blob {plumbing('hash-object', '-w', '--stdin', data=b'x')}\tx.py\n".encode())
    for _ in range(16):  # 2**16 paths from 17 small trees
        tree = plumbing("mktree", data=f"040000 tree {tree}\ta\n040000 tree {tree}\tb\n".encode())
    env = dict(os.environ, GIT_COMMITTER_DATE="2026-11-30T10:00:00+00:00", GIT_AUTHOR_DATE="2026-11-30T10:00:00+00:00")
    sha = subprocess.run([*GIT, "-C", str(bomb), "commit-tree", tree, "-m", "bomb"], capture_output=True, text=True,
                         check=True, env=env).stdout.strip()
    monkeypatch.setattr(git_commit, "MAX_OUTPUT_BYTES", 1 << 20)  # the listing is ~4 MiB
    with pytest.raises(Refused, match="git printed more than 1 MiB"):
        git_commit.write_commit(bomb, sha, tmp_path / "out")


# --- folder names ---

def test_a_username_ending_a_classmates_folder_name_does_not_take_that_folder():
    # gh classroom clone names folders mha-pe-<username>; 'pe-bob' chose a name so that bob's folder
    # 'mha-pe-bob' also ends in '-pe-bob' (the longer spelling won, and bob had "no submission").
    roster = Roster(("S1", "S2", "S3"), {"bob": "S1", "pe-bob": "S2", "ada": "S3"})
    found = {item.folder_id: item.student for item in match(["mha-pe-bob", "mha-pe-pe-bob", "mha-pe-ada"], roster)}
    assert found == {"mha-pe-bob": "S1", "mha-pe-pe-bob": "S2", "mha-pe-ada": "S3"}
    # A username that is another's whole folder name: the class's naming is read first.
    found = {item.folder_id: item.student for item in match(["hw1-bob", "hw1-hw1-bob", "hw1-cy"],
                                                            Roster(("bob", "hw1-bob", "cy")))}
    assert found == {"hw1-bob": "bob", "hw1-hw1-bob": "hw1-bob", "hw1-cy": "cy"}
