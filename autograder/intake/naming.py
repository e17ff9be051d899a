"""File and nbgrader names made from student ids: injective, length-bounded, no path tricks. Intake, planning
and every report name a student's files with these, so they sit below all of them."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ..worker.text import is_valid

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


def utf8_name(name: str) -> str:
    """A file name as ``os.listdir`` gives it, read as UTF-8 whatever this process's locale: its bytes
    (``os.fsencode``) decoded as UTF-8, each byte that is not UTF-8 a lone surrogate U+DC80-U+DCFF. Under a UTF-8
    locale the name itself; under another, a UTF-8 ``é`` is ``é`` here too, never its bytes' escapes, so a folder
    has one id on every machine (shards, ``--resume``). A name no file can have (any other surrogate) as it is."""
    try:
        return os.fsencode(name).decode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return name


def folder_id(name: str) -> str:
    """The student id of a class folder named ``name`` (as ``os.listdir`` gives it): the name itself when it is
    valid text, else each code point UTF-8 cannot hold spelled ``/XX`` (a byte that is not UTF-8, which
    ``os.fsdecode`` made U+DC80-U+DCFF; unzip makes ``Müller`` ``b'M\\xfcller'``, graded as ``M/FCller``), or
    ``/uXXXX`` (any other surrogate: none comes from a folder). No folder's name holds a ``/``, so the id is
    never another folder's, and two names never share one; ``safe_name`` turns the ``/`` into ``%2F``. The name
    is read as UTF-8 whatever the locale (:func:`utf8_name`)."""
    name = utf8_name(name)
    if is_valid(name):
        return name
    return "".join(char if is_valid(char) else f"/{ord(char) - 0xDC00:02X}" if 0xDC80 <= ord(char) <= 0xDCFF
                   else f"/u{ord(char):04X}" for char in name)


def folder_note(name: str) -> str:
    """The note a record gets when its student's folder ``name`` is not valid text (``""`` when it is)."""
    name = utf8_name(name)
    if is_valid(name):
        return ""
    raw = ascii(name.encode("utf-8", "surrogateescape")) if all(
        is_valid(char) or 0xDC80 <= ord(char) <= 0xDCFF for char in name) else ascii(name)
    return (f"the folder's name is not UTF-8 ({raw}): graded as {folder_id(name)!r}, each byte that is not "
            f"UTF-8 spelled /XX")


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
