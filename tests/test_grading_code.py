"""``--resume``'s list of grading code is derived, not kept by hand: a module that grading reaches (a new one in
a grading layer, one a grading command imports, even lazily, one a lesson's hidden tests import) counts by
itself; one that only reports or other commands use does not. Worked on a copy of the engine."""

import shutil

from autograder import paths
from autograder.intake import fingerprints

ENGINE = paths.REPO_ROOT / "autograder"


def _copy(tmp_path):
    copy = tmp_path / "autograder"
    for path in fingerprints.grading_code():
        (copy / path.relative_to(ENGINE)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, copy / path.relative_to(ENGINE))
    return copy


def _names(copy, inputs=()):
    return {path.relative_to(copy).as_posix() for path in fingerprints.grading_code(copy, inputs)}


def test_a_new_module_that_grading_reaches_counts_by_itself(tmp_path):
    copy = _copy(tmp_path)
    before = _names(copy)
    assert {"errors.py", "paths.py", "__init__.py", "commands/__init__.py", "commands/judge_loop.py"} <= before
    (copy / "judge" / "new_check.py").write_text("VALUE = 1\n")
    (copy / "commands" / "new_helper.py").write_text("from ..errors import KitError\n")
    (copy / "commands" / "unused.py").write_text("X = 1\n")
    (copy / "reports").mkdir()
    (copy / "reports" / "__init__.py").write_text("")
    (copy / "reports" / "new_view.py").write_text("from ..judge import new_check\n")
    loop = copy / "commands" / "judge_loop.py"
    loop.write_text(loop.read_text() + "\n\ndef _later():\n    from .new_helper import (\n        KitError,\n    )\n")
    assert _names(copy) - before == {"judge/new_check.py", "commands/new_helper.py"}


def test_what_a_lessons_files_import_counts_and_its_edit_changes_the_fingerprint(tmp_path):
    copy = _copy(tmp_path)
    (copy / "public_api.py").write_text("from .judge.rubric import graded  # noqa: F401\n")
    lesson = tmp_path / "lesson" / "check_x.py"  # a lesson outside the kit: its relative imports are its own
    lesson.parent.mkdir()
    lesson.write_text("import os\nfrom autograder.public_api import graded\nfrom .support import helper\n")
    assert _names(copy, [lesson]) - _names(copy) == {"public_api.py"}
    before = fingerprints.grader_fingerprint([lesson], engine=copy)
    (copy / "public_api.py").write_text("from .judge.rubric import graded, NotChecked  # noqa: F401\n")
    assert fingerprints.grader_fingerprint([lesson], engine=copy) != before
