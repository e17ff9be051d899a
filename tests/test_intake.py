"""Intake: a student folder is read without following anything, within caps, and never stops the class.

Each case is a way a student could point the grader at code that is not theirs (the instructor's solutions, a
classmate's repository) or make it read without end; each must be refused with a note, its bytes never read.
"""

import os
import shutil
import stat
import threading

import pytest

from autograder.intake.naming import MAX_NAME, colliding, nbgrader_safe_name, safe_name
from autograder.intake import source_tree
from autograder.intake.submission import MAX_ENTRIES, MAX_NOTEBOOK_BYTES, TOO_DEEP
from autograder.intake.submission import read_submission as read_with
from lesson import CONTRACT, MODULES, NOTEBOOK, RELEASE, SOLUTIONS

STUBS = RELEASE
PACKAGE = CONTRACT.package


def read_submission(folder):
    """Intake of the kit's lesson: its files and its notebook."""
    return read_with(folder, CONTRACT, NOTEBOOK)

SOLUTION_BYTES = {module: (SOLUTIONS / f"{module}.py").read_bytes() for module in MODULES}


def _student(root, name="student", layout=("assignments", PACKAGE)):
    folder = root / name
    target = folder.joinpath(*layout)
    target.mkdir(parents=True)
    for module in MODULES:
        shutil.copyfile(STUBS / f"{module}.py", target / f"{module}.py")
    return folder


def _no_solution_read(intake):
    assert not any(data == SOLUTION_BYTES[module] for module, data in intake.files.items())


def test_an_ordinary_repository_is_read_whole(tmp_path):
    folder = _student(tmp_path)
    (folder / "assignments" / PACKAGE / NOTEBOOK).write_text("{}")
    intake = read_submission(folder)
    assert set(intake.files) == set(MODULES) and intake.notebook == b"{}" and intake.notes() == []


def test_a_student_folder_that_is_a_link_is_refused(tmp_path):
    (tmp_path / "linked").symlink_to(SOLUTIONS)
    intake = read_submission(tmp_path / "linked")
    assert intake.files == {} and "symbolic link" in intake.problems["folder"]


@pytest.mark.parametrize("target", ["solutions", "classmate"])
def test_an_assignments_folder_that_links_elsewhere_is_not_followed(tmp_path, target):
    classmate = _student(tmp_path, "classmate")
    folder = tmp_path / "cheater"
    folder.mkdir()
    if target == "solutions":
        (folder / "assignments").symlink_to(SOLUTIONS.parent)
    else:
        (folder / "assignments").symlink_to("../classmate/assignments")  # relative, as a repository would hold it
    intake = read_submission(folder)
    assert intake.files == {} and intake.notebook is None
    assert "assignments is a symbolic link" in intake.problems["folder"]
    assert read_submission(classmate).files  # the classmate is read as usual
    _no_solution_read(intake)


def test_a_package_folder_that_links_elsewhere_is_not_followed(tmp_path):
    folder = tmp_path / "cheater"
    (folder / "assignments").mkdir(parents=True)
    (folder / "assignments" / PACKAGE).symlink_to(SOLUTIONS)
    intake = read_submission(folder)
    assert intake.files == {} and f"assignments/{PACKAGE} is a symbolic link" in intake.problems["folder"]


def test_linked_module_files_and_notebook_are_refused(tmp_path):
    folder = _student(tmp_path, layout=())
    (folder / "heads.py").unlink()
    (folder / "heads.py").symlink_to(SOLUTIONS / "heads.py")
    (folder / NOTEBOOK).symlink_to(SOLUTIONS / NOTEBOOK)
    intake = read_submission(folder)
    assert "heads" not in intake.files and "symbolic link" in intake.problems["heads"]
    assert intake.notebook is None and "symbolic link" in intake.problems["notebook"]
    assert any(note.startswith(f"{NOTEBOOK} was not used") for note in intake.notes())


def test_a_notebook_in_a_linked_folder_below_is_not_found(tmp_path):
    folder = _student(tmp_path, layout=())
    (folder / "elsewhere").symlink_to(SOLUTIONS)  # holds the source notebook, model answers and all
    intake = read_submission(folder)
    assert intake.notebook is None


def test_a_fifo_and_a_device_are_refused_without_being_opened(tmp_path):
    folder = _student(tmp_path, layout=())
    (folder / "heads.py").unlink()
    os.mkfifo(folder / "heads.py")  # opening it for reading would wait for a writer forever
    (folder / "attention.py").unlink()
    try:
        os.mknod(folder / "attention.py", 0o644 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero: endless bytes
    except PermissionError:
        pytest.skip("making a device node needs root")
    box = {}
    reader = threading.Thread(target=lambda: box.setdefault("intake", read_submission(folder)), daemon=True)
    reader.start()
    reader.join(60)  # a hang guard only: intake returns at once
    intake = box["intake"]
    assert "not a regular file" in intake.problems["heads"] and "not a regular file" in intake.problems["attention"]
    assert set(intake.files) == {"positional_encoding"}


def test_oversized_notebooks_are_refused(tmp_path):
    folder = _student(tmp_path, layout=())
    with open(folder / NOTEBOOK, "wb") as handle:  # sparse: huge to stat, nothing on disk
        handle.truncate(MAX_NOTEBOOK_BYTES + 1)
    intake = read_submission(folder)
    assert intake.notebook is None and "larger than" in intake.problems["notebook"]


def _nested(depth):
    """A helper nobody calls, ``depth`` attribute accesses deep inside 150 keyword calls: the syntax tree counts
    each keyword twice, the compiler once, so past the judge's parse it may still compile in the worker."""
    return "\n\ndef _never():\n    return " + "f(a=" * 150 + "a" + ".b" * depth + ")" * 150 + "\n"


def _deepest_parsed(depth_of_call=0):
    """The deepest ``_nested`` file the judge parses, asked from ``depth_of_call`` frames deeper than here."""
    if depth_of_call:
        return _deepest_parsed(depth_of_call - 1)
    low, high = 0, 5000
    while low < high:
        middle = (low + high + 1) // 2
        if source_tree.beyond_limits(_nested(middle) + f"# {depth_of_call}"):
            high = middle - 1
        else:
            low = middle
    return low


def test_a_file_past_the_parsers_limits_is_refused_and_never_staged(tmp_path):
    """Unread by the judge's scans, it could still compile in the worker (a 13 KiB helper once hid a forbidden
    call in the same file from the scan): refused, its parts score 0. A syntax error is the worker's to report."""
    folder = _student(tmp_path, layout=())
    attention = SOLUTION_BYTES["attention"].decode()
    (folder / "attention.py").write_text(attention + _nested(20000))
    (folder / "heads.py").write_text("def split_heads(:\n")
    intake = read_submission(folder)
    assert intake.problems == {"attention": TOO_DEEP} and set(intake.files) == set(MODULES) - {"attention"}
    assert source_tree.parse(attention + _nested(100)) is not None


def test_how_deep_a_file_may_nest_does_not_depend_on_where_it_is_read():
    """Intake and the scans read a file from different depths of the judge's stack: they must agree on it."""
    shallow, deep = _deepest_parsed(), _deepest_parsed(300)
    assert 1000 < shallow == deep
    assert not source_tree.beyond_limits(_nested(shallow)) and source_tree.beyond_limits(_nested(shallow + 1))


def test_a_folder_with_too_many_entries_is_refused(tmp_path):
    folder = _student(tmp_path, layout=())
    crowd = folder / "crowd"
    crowd.mkdir()
    for index in range(MAX_ENTRIES + 1):
        (crowd / str(index)).touch()
    intake = read_submission(folder)
    assert intake.files == {} and f"more than {MAX_ENTRIES}" in intake.problems["folder"]


def test_version_control_folders_do_not_count_against_the_cap(tmp_path):
    folder = _student(tmp_path, layout=())
    objects = folder / ".git" / "objects"
    objects.mkdir(parents=True)
    for index in range(MAX_ENTRIES + 1):
        (objects / str(index)).touch()
    assert set(read_submission(folder).files) == set(MODULES)


def test_an_unreadable_folder_is_a_note_not_an_exception(tmp_path):
    intake = read_submission(tmp_path / "does-not-exist")
    assert intake.files == {} and intake.problems["folder"]


TRICKY_IDS = ["alice", "a b", "a%20b", "A B", ".x", "%2Ex", "-x", "%2Dx", "~x", "%7Ex", "a_b", "a_5Fb", "a%b",
              "a_pct_25b", "a%25b", "ünï", "ünï/x", "..", "", "\x00", "%00", "x" * 400, "x" * 401, "é" * 300,
              "é" * 301, "a\nb", "_zz", "<script>alert(1)</script>", "日本語" * 60]


@pytest.mark.parametrize("name", [safe_name, nbgrader_safe_name], ids=["files", "nbgrader"])
def test_names_for_ids_are_injective_bounded_and_plain(name):
    names = [name(student) for student in TRICKY_IDS]
    assert len(set(names)) == len(TRICKY_IDS)
    for made in names:
        assert 0 < len(made) <= MAX_NAME and len(made.encode()) <= MAX_NAME
        assert "/" not in made and "\n" not in made and "\x00" not in made
        assert not made.startswith((".", "-")) and made not in ("", ".", "..")


def test_the_old_nbgrader_collision_is_gone():
    assert nbgrader_safe_name("a%b") != nbgrader_safe_name("a_pct_25b")
    assert colliding(TRICKY_IDS) == set()
