"""``python -m autograder new-lesson ID --to DIR``: a working skeleton of a lesson, for an author to grow.

The skeleton is small but complete, so every command works on it from the first minute: one student file
(``center.py``: ``center``, and ``standardize`` built on it) with its reference between the solution markers, its
public tests and ``conftest.py``; hidden tests that import only ``autograder.lesson_api``, among them a parametrized
check and a check of ``standardize`` behind center's gate (a broken ``center`` is charged to center alone); an
nbgrader notebook with an autograded and a written answer; bugs (one no public test sees) and correct variants.
The files' text is :mod:`.skeleton_files`; ``docs/authoring.md`` explains each piece; the author then renames and
rewrites them. Nothing of the kit's own lesson is copied.
"""

from __future__ import annotations

import keyword
from pathlib import Path

from ..errors import KitError
from .skeleton_files import SKELETON


def scaffold(lesson_id: str, destination: str | Path) -> list[Path]:
    """Write the skeleton lesson ``lesson_id`` into ``destination`` (new or empty); return the files written.
    Then ``release --assignment DIR`` writes its student package."""
    if not lesson_id.isidentifier() or keyword.iskeyword(lesson_id) or not lesson_id.islower():
        raise KitError(f"a lesson id is a lower-case Python package name, got {lesson_id!r}")
    destination = Path(destination)
    if destination.exists() and (not destination.is_dir() or any(destination.iterdir())):
        raise KitError(f"--to must be a new or empty folder: {destination}")
    written = []
    for name, text in SKELETON.items():
        path = destination / name.replace("{id}", lesson_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.replace("{id}", lesson_id).replace("{ID}", lesson_id.upper()), encoding="utf-8")
        written.append(path)
    return written
