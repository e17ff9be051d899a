"""The sandbox's faults are never the student's: a file intake read that its worker then cannot find makes the
record a grader failure for a human (``sandbox_fault``), and ``--resume`` keeps no record of another sandbox mode.

Before, a confined worker that lost read access to its staged copy charged every check to the student ("attention.py
is missing from the submission") and nobody was flagged."""

import pytest
from autograder.commands.grading import grade_class
from autograder.commands.planning import plan
from autograder.intake.naming import result_path
from autograder.lesson.catalogue import copy_package
from autograder.records import triage
from autograder.records.results import load_record
from autograder.sandbox import launch
from lesson import LESSON, MODULES, SOLUTIONS

pytestmark = pytest.mark.slow  # grades a class, builds a venv or runs the demo

LOST = MODULES[-1]  # the file the sandbox loses


def test_a_file_the_worker_lost_is_the_sandboxs_fault_and_resume_regrades_it(tmp_path, monkeypatch):
    class_dir, out = tmp_path / "class", tmp_path / "out"
    copy_package(SOLUTIONS, class_dir / "ada", MODULES)
    spawn, launcher = launch.WorkerFactory._spawn, launch.WorkerFactory.launcher

    # The worker is handed every file but one, as a sandbox that stages badly would: intake read all of them.
    monkeypatch.setattr(launch.WorkerFactory, "_spawn",
                        lambda self, files: spawn(self, {k: v for k, v in files.items() if k != LOST}))
    monkeypatch.setattr(launch.WorkerFactory, "launcher",
                        lambda self, files, scratch: launcher(self, {k: v for k, v in files.items() if k != LOST}
                                                              if not self.forks else files, scratch))
    lines = []
    [result] = grade_class(class_dir, out, skip_notebook=True, emit=lines.append)
    assert [failure.kind for failure in result.grader_failures] == ["sandbox_fault"]
    assert result.tests == () and result.score == 0
    assert f"{LOST}.py was handed in and read" in result.grader_failures[0].reason
    assert [item.student for item in triage.needs_a_look([result])] == ["ada"]
    assert any("ada" in line and "sandbox_fault" in line for line in lines), lines

    monkeypatch.undo()  # the machine mended: --resume grades the student, and this time fully
    [regraded] = grade_class(class_dir, out, resume=True, skip_notebook=True, emit=lambda line: None)
    assert regraded.grader_failures == () and regraded.score == regraded.max_score > 0


def test_resume_keeps_no_record_of_another_sandbox_mode(tmp_path):
    class_dir, out = tmp_path / "class", tmp_path / "out"
    copy_package(SOLUTIONS, class_dir / "ada", MODULES)
    [graded] = grade_class(class_dir, out, skip_notebook=True, emit=lambda line: None)
    assert load_record(result_path(out, "ada"))[1] == ""
    students = [("ada", class_dir / "ada")]
    tasks, kept = plan(students, out, LESSON, resume=True, notebook=False, sandbox=graded.sandbox)
    assert (tasks, [result.student for result in kept]) == ([], ["ada"])
    lines = []
    other = "uid" if graded.sandbox != "uid" else "bwrap"
    tasks, kept = plan(students, out, LESSON, resume=True, notebook=False, sandbox=other, emit=lines.append)
    assert ([task.student for task in tasks], kept) == (["ada"], [])
    assert any("another sandbox" in line and "'ada'" in line for line in lines), lines


def test_a_student_exception_named_missingfile_is_charged_to_the_student(tmp_path):
    """A submission cannot make itself "not graded" by raising a class of its own called MissingFile on import:
    only the worker's own record (its mro exactly ``["MissingFile"]``) speaks of a lost file."""
    class_dir, out = tmp_path / "class", tmp_path / "out"
    folder = copy_package(SOLUTIONS, class_dir / "ada", MODULES)
    source = folder / f"{LOST}.py"
    source.write_text("class MissingFile(Exception):\n    pass\n\n\nraise MissingFile('gone')\n" + source.read_text())
    [result] = grade_class(class_dir, out, skip_notebook=True, emit=lambda line: None)
    assert result.grader_failures == () and result.tests and result.score < result.max_score
