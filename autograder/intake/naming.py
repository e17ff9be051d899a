"""File and nbgrader names made from student ids: injective, length-bounded, no path tricks. Intake, planning
and every report name a student's files with these, so they sit below all of them."""

from __future__ import annotations

import hashlib
from pathlib import Path

RESULTS = "results"  # the folder of an output folder that holds one record per student
MAX_NAME = 100  # characters of a name made from an id; well under any file system's 255 bytes
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")


def _escaped(student: str, keep: frozenset, escape: str, long_mark: str) -> str:
    """An injective, length-bounded name for ``student``: characters in ``keep`` stay (a leading ``.`` or ``-``
    never does), every other character becomes ``escape`` + the hex of its UTF-8 bytes. A name longer than
    ``MAX_NAME`` keeps a prefix and ends in ``long_mark`` + a hash of the whole id; ``long_mark`` cannot occur
    in a short name, so short and long names never meet."""
    parts = []
    for index, char in enumerate(student):
        if char in keep and not (index == 0 and char in ".-"):
            parts.append(char)
        else:
            parts.append("".join(f"{escape}{byte:02X}" for byte in char.encode("utf-8", "surrogatepass")))
    name = "".join(parts)
    if name and len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(student.encode("utf-8", "surrogatepass")).hexdigest()[:20]
    prefix, used = [], 0
    for part in parts:  # whole characters only: a cut escape could read as another character
        if used + len(part) > MAX_NAME - len(long_mark) - len(digest):
            break
        prefix.append(part)
        used += len(part)
    return "".join(prefix) + long_mark + digest


def safe_name(student: str) -> str:
    """A file name for a student id: injective, at most ``MAX_NAME`` characters, no path tricks (``..``, a
    leading dot or dash, ``/``), any unicode safe. Common ids stay readable (``alice``, ``a b``)."""
    return _escaped(student, _PLAIN | frozenset(" ._-"), "%", "~")


def nbgrader_safe_name(student: str) -> str:
    """The student's id for nbgrader (folder names and database keys): letters, digits and ``-`` stay, the rest
    becomes ``_XX``; injective and length-bounded like :func:`safe_name`."""
    return _escaped(student, _PLAIN | frozenset("-"), "_", "_zz")


def colliding(students: list[str]) -> set[str]:
    """Ids whose file names (results, feedback, nbgrader) would be the same as an earlier id's."""
    seen: dict[str, str] = {}
    clashes = set()
    for student in students:
        for name in (safe_name(student), "nb:" + nbgrader_safe_name(student)):
            if seen.setdefault(name, student) != student:
                clashes.add(student)
    return clashes


def result_path(out_dir: str | Path, student: str) -> Path:
    """Where ``student``'s record sits in a grade run's output folder."""
    return Path(out_dir) / RESULTS / f"{safe_name(student)}.json"
