"""Where two submissions match, line by line, for the top rows of the similarity report: each student's lines
held by a shared own fingerprint, numbered by region (a run of matches in the first student's code, in the order
it is written), each file's share, and the side-by-side page drawn by :mod:`..reports.similarity_html`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np

from .similarity_index import Index, Pair
from .winnow import Prints


def _occurrences(prints: dict[str, Prints], shared: np.ndarray) -> list[tuple[str, int, int, int]]:
    """``(module, first line, last line, hash)`` of each of a student's fingerprints in ``shared``, in order."""
    found = []
    for module in sorted(prints):
        mine = prints[module]
        kept = np.isin(mine.hashes, shared)
        found += sorted(zip([module] * int(kept.sum()), mine.first[kept].tolist(), mine.last[kept].tolist(),
                            mine.hashes[kept].tolist()))
    return found


def _regions(occurrences: list[tuple[str, int, int, int]]) -> dict[int, int]:
    """Each hash's region: runs of touching or overlapping matches in one file are one region, numbered from 1."""
    region, last, module_now, of_hash = 0, -2, None, {}
    for module, first, final, value in occurrences:
        if module != module_now or first > last + 1:
            region += 1
            module_now, last = module, final
        last = max(last, final)
        of_hash.setdefault(value, region)
    return of_hash


def _marks(occurrences: list[tuple[str, int, int, int]], of_hash: dict[int, int]) -> dict[str, dict[int, int]]:
    """``{module: {line: region}}``: each matched line, with the lowest region that covers it."""
    marks: dict[str, dict[int, int]] = {}
    for module, first, final, value in occurrences:
        lines = marks.setdefault(module, {})
        for line in range(first, final + 1):
            lines[line] = min(lines.get(line, of_hash[value]), of_hash[value])
    return marks


def by_file(first: dict[str, Prints], second: dict[str, Prints], own_a: np.ndarray, own_b: np.ndarray
            ) -> tuple[tuple[str, float], ...]:
    """Each file both hand in where they share an own fingerprint: its smaller share within that file."""
    shares = []
    for module in sorted(set(first) & set(second)):
        mine = np.intersect1d(first[module].hashes, own_a)
        theirs = np.intersect1d(second[module].hashes, own_b)
        common = len(np.intersect1d(mine, theirs))
        if common:
            shares.append((module, common / max(len(mine), len(theirs))))
    return tuple(shares)


def views(pairs: list[Pair], rows: np.ndarray, index: Index, prints: dict[str, dict[str, Prints]],
          files_of: Callable[[str], dict[str, bytes]], out_dir: Path) -> list[Pair]:
    """``pairs`` (the top rows, ranked as ``rows``) with their files' shares and side-by-side pages, written into
    ``out_dir`` (the pages of an earlier run removed first); ``files_of(student)``: a student's files."""
    from ..reports import similarity_html

    similarity_html.clear(out_dir)
    shown = []
    for number, (found, row) in enumerate(zip(pairs, rows), 1):
        own_a, own_b = index.own[int(row[0])], index.own[int(row[1])]
        shared = np.intersect1d(own_a, own_b)
        left, right = _occurrences(prints[found.a], shared), _occurrences(prints[found.b], shared)
        of_hash = _regions(left)
        texts = [{module: data.decode("utf-8", errors="replace") for module, data in files_of(student).items()}
                 for student in (found.a, found.b)]
        found = replace(found, by_file=by_file(prints[found.a], prints[found.b], own_a, own_b))
        page = similarity_html.write_page(out_dir, number, found, texts[0], texts[1], _marks(left, of_hash),
                                          _marks(right, of_hash))
        shown.append(replace(found, view=page))
    return shown
