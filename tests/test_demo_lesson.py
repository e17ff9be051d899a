"""``demo --assignment DIR`` on a lesson written by ``new-lesson`` outside the kit: it writes into the lesson's own
``build/demo`` and nowhere else (the kit's files, tracked or not, keep their sizes and times), takes ``--jobs``,
and every run starts from an empty folder: no file of an earlier run (another lesson's students, an old nbgrader
gradebook) is kept."""

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autograder import paths
from autograder.commands.demo import run_demo
from autograder.errors import KitError

# Caches any concurrent pytest run writes (hypothesis's too: the demo runs none), the venv and git's own files.
SKIPPED = {".venv", ".git", "__pycache__", ".pytest_cache", ".hypothesis"}


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` (tracked, untracked and ignored alike), but the venv, git's own and caches:
    ``{path: (size, mtime_ns)}``."""
    found = {}
    for folder, folders, files in os.walk(root):
        folders[:] = [name for name in folders if name not in SKIPPED]
        for name in files:
            path = Path(folder, name)
            if not path.is_symlink():
                status = path.stat()
                found[path.relative_to(root).as_posix()] = (status.st_size, status.st_mtime_ns)
    return found


def kit(*args: str) -> subprocess.CompletedProcess:
    """``python -m autograder ARGS`` from the kit's root, as an author runs it."""
    return subprocess.run([sys.executable, "-m", "autograder", *args], cwd=paths.REPO_ROOT, capture_output=True,
                          text=True, timeout=900)


def gradebook_students(out: Path) -> set[str]:
    with open(out / "graded" / "gradebook.csv", newline="") as opened:
        return {row["student"] for row in csv.DictReader(opened)}


@pytest.mark.slow  # runs the demo twice
def test_the_demo_of_a_lesson_writes_in_its_folder_only_and_starts_empty(tmp_path):
    lesson = tmp_path / "lesson"
    for step in (["new-lesson", "demo1", "--to", str(lesson)], ["release", "--assignment", str(lesson)]):
        done = kit(*step)
        assert done.returncode == 0, done.stdout + done.stderr
    before = snapshot(paths.REPO_ROOT)

    done = kit("demo", "--assignment", str(lesson), "--jobs", "2")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = lesson / "build" / "demo"
    students = sorted(entry.name for entry in (out / "class").iterdir())
    assert {"reference", "stubs"} <= set(students)
    assert f"sample class: {', '.join(students)}\n" in done.stdout
    assert gradebook_students(out) == set(students)

    # What a second run must not keep: a file of its own in the output folder, a stale student of another class.
    (out / "planted.txt").write_text("left by an earlier run")
    (out / "class" / "stale-student").mkdir()
    (out / "class" / "stale-student" / "center.py").write_text("def center(x):\n    return x\n")
    done = kit("demo", "--assignment", str(lesson), "--jobs", "1")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert not (out / "planted.txt").exists()
    assert sorted(entry.name for entry in (out / "class").iterdir()) == students
    assert gradebook_students(out) == set(students)

    after = snapshot(paths.REPO_ROOT)
    assert sorted(path for path in before.keys() | after.keys() if before.get(path) != after.get(path)) == [], (
        "the demo wrote outside the lesson's folder")


def test_the_demo_refuses_an_out_folder_it_did_not_write(tmp_path):
    """``--out`` may name a folder of the user's own: the demo empties only its own output."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    with pytest.raises(KitError) as refused:
        run_demo(mine, emit=lambda line: None)
    assert str(refused.value) == f"--out folder holds files the demo did not write: {mine} (name an empty or new one)"
    assert [entry.name for entry in mine.iterdir()] == ["notes.txt"]


def test_an_out_folder_of_the_users_own_is_never_emptied(tmp_path):
    """`--out` naming an instructor's folder that happens to hold `class/` and `graded/` (their real class) is
    refused with one line and left as it was; only a stamped folder, or the default one, is the demo's to empty."""
    from autograder.commands.demo import STAMP, start_empty
    from autograder.errors import KitError

    mine = tmp_path / "course"
    (mine / "class" / "ada").mkdir(parents=True)
    (mine / "class" / "ada" / "heads.py").write_text("x = 1\n")
    (mine / "graded").mkdir()
    with pytest.raises(KitError, match="holds files the demo did not write"):
        start_empty(mine)
    assert (mine / "class" / "ada" / "heads.py").read_text() == "x = 1\n"
    start_empty(mine, default=True)  # the kit's own build/demo from an older run, unstamped
    assert sorted(entry.name for entry in mine.iterdir()) == [STAMP]
    (mine / "graded").mkdir()
    start_empty(mine)  # stamped: the demo's own
    assert sorted(entry.name for entry in mine.iterdir()) == [STAMP]
