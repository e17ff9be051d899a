"""The class list: who should hand in, and which class folder is whose.

A roster is GitHub Classroom's roster export (``identifier``, ``github_username``, ...) or a plain CSV of ids
(a first column, with or without a header). Each class folder is matched to one roster id: by name (the id or
the GitHub username), by the suffix ``gh classroom clone`` gives its folders (``<assignment>-<username>``), or
by a name that differs only in case, spacing, a copy suffix (``jdoe (1)``) or a look-alike letter (a Cyrillic
``а`` for ``a``). One folder per student is graded; the others are named in the student's record, never graded
as a second student. Reading never runs anything; a malformed roster is one line of error.
"""

from __future__ import annotations

import csv
import io
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import KitError

MAX_ROSTER_BYTES = 4 << 20
# Letters that look like Latin ones in most fonts (Cyrillic, Greek): an id written with one is the same id to a
# human reading the gradebook.
LOOKALIKES = str.maketrans("асеіјоорѕхуԁɡαεικνορτυχ", "aceijoopsxydgaeikvoptux")
COPY_SUFFIX = re.compile(r"\s*\(\d{1,3}\)$")  # what a browser or file manager adds to a second copy
ID_HEADERS = ("identifier", "id", "student", "student_id", "login", "username", "github_username")


def key(name: str) -> str:
    """What two names share when a human would take them for one: case, width, spacing and look-alike letters
    ignored, and a copy suffix (`` (1)``) dropped."""
    text = unicodedata.normalize("NFKC", name).casefold().translate(LOOKALIKES).strip()
    text = COPY_SUFFIX.sub("", text) or text
    return "".join(text.split())


@dataclass(frozen=True)
class Roster:
    """``ids``: the students, in the roster's order; ``aliases``: each other name a student's folder may carry
    (a GitHub username) -> their id; ``names``: id -> display name, where the roster has one."""

    ids: tuple[str, ...]
    aliases: dict[str, str] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)

    def spellings(self) -> dict[str, str]:
        """Every name that is exactly a student's (their id, their aliases) -> their id."""
        return {**{alias: student for alias, student in self.aliases.items()}, **{s: s for s in self.ids}}


def load_roster(path: str | Path) -> Roster:
    """The roster in ``path``; KitError (one line) when it is missing, too large, not CSV or names nobody."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise KitError(f"--roster {path}: {error.strerror or error}") from None
    if len(data) > MAX_ROSTER_BYTES:
        raise KitError(f"--roster {path}: larger than {MAX_ROSTER_BYTES >> 20} MiB")
    try:
        rows = [row for row in csv.reader(io.StringIO(data.decode("utf-8-sig"))) if any(cell.strip() for cell in row)]
    except (UnicodeDecodeError, csv.Error) as error:
        raise KitError(f"--roster {path}: not a CSV file in UTF-8 ({error})") from None
    if not rows:
        raise KitError(f"--roster {path}: no students in it")
    header = [cell.strip().casefold() for cell in rows[0]]
    if any(name in header for name in ID_HEADERS):
        return _classroom(rows[1:], header, path)
    return _plain(rows, path)


def _classroom(rows: list[list[str]], header: list[str], path: Path) -> Roster:
    def cell(row, name):
        return row[header.index(name)].strip() if name in header and header.index(name) < len(row) else ""

    ids, aliases, names = [], {}, {}
    for row in rows:
        identifier = next((cell(row, name) for name in ID_HEADERS if name != "github_username" and cell(row, name)), "")
        username = cell(row, "github_username")
        student = identifier or username
        if not student:
            continue
        ids.append(student)
        if username and username != student:
            aliases[username] = student
        if cell(row, "name"):
            names[student] = cell(row, "name")
    return _checked(ids, aliases, names, path)


def _plain(rows: list[list[str]], path: Path) -> Roster:
    return _checked([row[0].strip() for row in rows if row and row[0].strip()], {}, {}, path)


def _checked(ids: list[str], aliases: dict[str, str], names: dict[str, str], path: Path) -> Roster:
    if not ids:
        raise KitError(f"--roster {path}: no students in it")
    twice = sorted({student for student in ids if ids.count(student) > 1})
    if twice:
        raise KitError(f"--roster {path}: ids listed twice: {', '.join(map(ascii, twice[:5]))}")
    return Roster(tuple(ids), aliases, names)


@dataclass(frozen=True)
class Match:
    """Whose a class folder is: ``student`` (a roster id, or the folder's own id when it matches nobody),
    ``how``: "exact", "suffix" (``<assignment>-<username>``), "alike" (a look-alike name) or "unknown"."""

    folder_id: str
    student: str
    how: str


def _class_prefix(folder_ids: list[str], spellings: dict[str, str]) -> str | None:
    """The prefix ``gh classroom clone`` gave this class's folders (``<prefix>-<username>``): the one most
    folders read as a prefix and a spelling, if more than half do; None otherwise. A folder ending in
    ``-<username>`` is read with it first: a username chosen to end another's folder name (``hw1-bob`` for the
    folder ``cs-hw1-bob`` of ``bob``) must not take that folder."""
    counts = Counter(prefix for folder_id in folder_ids for prefix in {
        folder_id[:-len(spelling) - 1] for spelling in spellings if folder_id.endswith("-" + spelling)})
    common = max(sorted(counts), key=counts.__getitem__, default=None)  # sorted: ties broken alike everywhere
    return common if common is not None and counts[common] * 2 > len(folder_ids) else None


def match(folder_ids: Iterable[str], roster: Roster) -> list[Match]:
    """Each class folder (by its id) matched to a roster id, in the order given."""
    spellings = roster.spellings()
    by_key: dict[str, set[str]] = {}
    for spelling, student in spellings.items():
        by_key.setdefault(key(spelling), set()).add(student)
    folder_ids = list(folder_ids)
    prefix = _class_prefix(folder_ids, spellings)
    matches = []
    for folder_id in folder_ids:
        named = folder_id[len(prefix) + 1:] if prefix is not None and folder_id.startswith(prefix + "-") else None
        if named in spellings:  # the class's own naming: <prefix>-<username>
            matches.append(Match(folder_id, spellings[named], "suffix"))
            continue
        if folder_id in spellings:
            matches.append(Match(folder_id, spellings[folder_id], "exact"))
            continue
        # gh classroom clone names a folder <assignment prefix>-<username>: the longest spelling it ends with
        suffixed = sorted((spelling for spelling in spellings if folder_id.endswith("-" + spelling)), key=len)
        if suffixed:
            matches.append(Match(folder_id, spellings[suffixed[-1]], "suffix"))
            continue
        alike = by_key.get(key(folder_id), set())
        if len(alike) == 1:
            matches.append(Match(folder_id, next(iter(alike)), "alike"))
        else:
            matches.append(Match(folder_id, folder_id, "unknown"))
    return matches


def alike_groups(ids: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Each id that looks like another -> the others it looks like (sorted); ids alike nobody are left out."""
    groups: dict[str, list[str]] = {}
    for student in ids:
        groups.setdefault(key(student), []).append(student)
    return {student: tuple(sorted(other for other in group if other != student))
            for group in groups.values() if len(group) > 1 for student in group}
