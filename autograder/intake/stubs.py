"""Whether a student file is still the released stub: the same syntax tree (docstrings and code), whatever its
layout and comments. Read by intake (which copy of the files to grade) and by who-needs-a-look (stubs handed in
unchanged); parsed, never run."""

from __future__ import annotations

import ast
import functools
import json
from collections.abc import Mapping
from pathlib import Path

from . import source_tree


@functools.lru_cache(maxsize=32)  # the stubs' shapes, asked for every student
def _shape(source: bytes) -> str | None:
    """The file's syntax tree as text (no positions), or None when it does not parse."""
    parsed = source_tree.parse(source)
    return None if parsed is None else ast.dump(parsed.tree, annotate_fields=False, include_attributes=False)


def is_stub(source: bytes, stub: bytes | None) -> bool:
    """Whether ``source`` is ``stub`` up to layout and comments (False where either does not parse)."""
    if stub is None:
        return False
    mine = _shape(source)
    return mine is not None and mine == _shape(stub)


def stub_files(release: Path, modules: tuple[str, ...]) -> dict[str, bytes]:
    """``{module: the released stub's bytes}`` from the release folder (modules it lacks are left out)."""
    return {module: (release / f"{module}.py").read_bytes() for module in modules
            if (release / f"{module}.py").is_file()}


def unchanged(files: Mapping[str, bytes], stubs: Mapping[str, bytes]) -> tuple[str, ...]:
    """The modules of ``files`` handed in as released, sorted."""
    return tuple(sorted(module for module, data in files.items() if is_stub(data, stubs.get(module))))


def notebook_sources(data: bytes | None) -> list[str] | None:
    """The cells' sources of a notebook (None when it is no notebook): what says whether anything was written."""
    try:
        cells = json.loads(data)["cells"] if data else None
        return [cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"]) for cell in cells]
    except (ValueError, KeyError, TypeError, RecursionError):
        return None


def notebook_unchanged(data: bytes | None, released: bytes | None) -> bool:
    """Whether a handed-in notebook is the released one, every cell as it was (no answer written)."""
    mine = notebook_sources(data)
    return mine is not None and mine == _released_sources(released)


@functools.lru_cache(maxsize=2)  # the released notebook, parsed once a run rather than once a student
def _released_sources(released: bytes | None) -> list[str] | None:
    return notebook_sources(released)
