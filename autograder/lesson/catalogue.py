"""Build submissions from the reference by small text edits: the bug catalogue and the sample class.

A catalogue entry names a student file and edits to apply to the reference's
version of it (``old`` must occur exactly once, so an entry that no longer
matches the reference fails loudly instead of silently testing nothing), or
text to put in front of it. Entries also say which hidden tests must catch them.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from .assignment import Assignment
from .toml_file import read_toml
from ..errors import KitError


@dataclass(frozen=True)
class Edit:
    file: str
    old: str = ""
    new: str = ""
    prepend: str = ""


@dataclass(frozen=True)
class Mutant:
    """One catalogued submission: a bug, a correct variant, or a hostile one."""

    id: str
    title: str
    edits: tuple
    catches: tuple = ()  # hidden tests (function names) that must fail on it
    concept: str = ""  # words the feedback of a caught bug (and its public test's message) must contain
    demo: bool = False
    may_lose: tuple = field(default=())  # for correct variants: tests they may fail (e.g. the speed check)
    topics: tuple = ()  # for bugs: the concepts it breaks (the hidden tests' topic keys)
    not_public: str = ""  # for bugs no public test can see: why (the public tests must catch every other one)
    base: str = "reference"  # what the edits apply to: "reference" or "stubs" (hostile submissions)

    @property
    def files(self) -> tuple[str, ...]:
        """The student files its edits touch (``<module>.py``)."""
        return tuple(dict.fromkeys(edit.file for edit in self.edits))


ENTRY_KEYS = ("id", "title", "edit", "file", "catches", "concept", "demo", "may_lose", "topics", "not_public", "base")
EDIT_KEYS = ("file", "old", "new", "prepend")
ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


def load_catalogue(path: str | Path, kind: str) -> list[Mutant]:
    """The entries ``[[kind]]`` of a TOML catalogue file; a key it does not know is a one-line KitError (a
    misspelt ``catch`` would otherwise check nothing)."""
    path = Path(path)
    data = read_toml(path, "catalogue")
    mutants = []
    for entry in data.get(kind, []):
        unknown = sorted(set(entry) - set(ENTRY_KEYS)) + sorted(
            f"edit.{key}" for edit in entry.get("edit", []) for key in set(edit) - set(EDIT_KEYS))
        if unknown:
            raise KitError(f"{path}: [[{kind}]] {entry.get('id', '?')!r} has unknown key {', '.join(unknown)} "
                           "(docs/authoring.md lists every key)")
        edits = tuple(Edit(file=edit.get("file", entry.get("file", "")), old=edit.get("old", ""),
                           new=edit.get("new", ""), prepend=edit.get("prepend", ""))
                      for edit in entry.get("edit", []))
        mutants.append(Mutant(id=entry["id"], title=entry.get("title", entry["id"]), edits=edits,
                              catches=tuple(entry.get("catches", ())), concept=entry.get("concept", ""),
                              demo=bool(entry.get("demo", False)), may_lose=tuple(entry.get("may_lose", ())),
                              topics=tuple(entry.get("topics", ())), not_public=str(entry.get("not_public", "")),
                              base=str(entry.get("base", "reference"))))
    ids = [mutant.id for mutant in mutants]
    if len(set(ids)) != len(ids):
        raise KitError(f"{path}: duplicate ids in [[{kind}]]")
    odd = [repr(name) for name in ids if not isinstance(name, str) or not ID.fullmatch(name)]
    if odd:  # each id names a submission's folder
        raise KitError(f"{path}: [[{kind}]] ids must be letters, digits, '-' and '_', got {', '.join(odd)}")
    return mutants


def distinct_ids(*catalogues: list[Mutant], taken: tuple[str, ...] = ()) -> None:
    """Refuse, in one line, an id two catalogues share (or one of ``taken``, such as ``reference``): graded in one
    class, one submission's folder would replace the other's."""
    seen = set(taken)
    for mutants in catalogues:
        for mutant in mutants:
            if mutant.id in seen:
                reserved = f", and {', '.join(map(repr, taken))} are taken" if taken else ""
                raise KitError(f"catalogue id {mutant.id!r} is used twice (ids are one namespace across the "
                               f"catalogue's files{reserved})")
            seen.add(mutant.id)


def build(mutant: Mutant, destination: str | Path, assignment: Assignment, source: str | Path | None = None
          ) -> Path:
    """Write the assignment's reference (or, for ``base = "stubs"``, its released stubs) module files with
    ``mutant``'s edits applied into ``destination``."""
    bases = {"reference": assignment.solutions, "stubs": assignment.release}
    if mutant.base not in bases:
        raise KitError(f"{mutant.id}: base must be one of {', '.join(bases)}, not {mutant.base!r}")
    source = Path(source or bases[mutant.base])
    destination = Path(destination)
    destination.mkdir(parents=True, exist_ok=True)
    texts = {module: (source / f"{module}.py").read_text(encoding="utf-8") for module in assignment.contract.modules}
    for edit in mutant.edits:
        module = edit.file.removesuffix(".py")
        if module not in texts:
            raise KitError(f"{mutant.id}: unknown file {edit.file!r}")
        if edit.old:
            count = texts[module].count(edit.old)
            if count != 1:
                raise KitError(f"{mutant.id}: edit text found {count} times in {edit.file} (must be exactly once)")
            texts[module] = texts[module].replace(edit.old, edit.new)
        if edit.prepend:
            texts[module] = edit.prepend + texts[module]
    for module, text in texts.items():
        (destination / f"{module}.py").write_text(text, encoding="utf-8")
    return destination


def copy_package(source: str | Path, destination: str | Path, modules: tuple[str, ...]) -> Path:
    """Copy the student files (``modules``, stems) of a package folder into ``destination``."""
    destination = Path(destination)
    destination.mkdir(parents=True, exist_ok=True)
    for module in modules:
        shutil.copyfile(Path(source) / f"{module}.py", destination / f"{module}.py")
    return destination
