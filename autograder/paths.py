"""Where the kit's own folders are, relative to this package (constants only; a lesson's folders are in its
descriptor, see :mod:`autograder.lesson.assignment`)."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
