"""The class's fingerprint index for ``similarity``: identical submissions grouped, common passages left out, and
only the pairs that share a fingerprint counted (from the index's posting lists, never every pair), then ranked.

A *unit* is one distinct submission: the students whose fingerprints (boilerplate removed) are exactly the same,
sorted by id, the units by their first id. A fingerprint held by more than ``limit`` units is a passage most of
the class writes alike (or was given) and is ignored, as MOSS's ``-m`` does; a unit's *own* fingerprints are the
rest. A pair's shared count is how many own fingerprints both hold; its *smaller share* is that count over the
larger of the two own counts (the share of each student's own code found in the other's, the smaller way).

Its shared *length* weighs each shared fingerprint by how rare it is: one that ``d`` submissions hold counts
``1 / (d - 1)`` (fully when only the two hold it, hardly when twenty do, as for a style many students share), so
two students who converged on the same common styles rank below two who share what nobody else wrote. The score
is the smaller share times that length: a short partial submission inside a long one, or two short ones alike,
rank below two long submissions alike. Ties: more shared fingerprints first, then by ids. Lengths are sums of
fixed-point integers (:data:`ONE` a fingerprint), so every shard and every run add them up exactly alike.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FLOOR = 5  # a passage is common only when more than this many submissions hold it, whatever the class's size
_FLUSH = 1 << 22  # pair codes held before they are summed
ONE = 1 << 32  # a fingerprint's weight when only two submissions hold it (fixed point: sums are exact)


def weight(holders: np.ndarray) -> np.ndarray:
    """A fingerprint's weight in a pair's length when ``holders`` submissions hold it (a group's own: 1)."""
    return ONE // np.maximum(np.asarray(holders, dtype=np.int64) - 1, 1)


@dataclass(frozen=True)
class Pair:
    """A row of the report: two students, or a group of identical submissions (``identical``: ``a``, ``b`` and
    ``same_as_a`` hand in the same code). ``same_as_a``/``same_as_b``: the others whose submission is identical
    to ``a``'s/``b``'s, named in the same row."""

    a: str
    b: str
    a_in_b: float  # share of a's own fingerprints found in b's
    b_in_a: float
    by_file: tuple[tuple[str, float], ...] = ()  # (module, the smaller share within that file)
    shared: int = 0  # own fingerprints both hold
    length: float = 0.0  # those fingerprints weighed by rarity (1 for one only these two hold)
    same_as_a: tuple[str, ...] = ()
    same_as_b: tuple[str, ...] = ()
    identical: bool = False
    view: str = ""  # its side-by-side page, relative to the output folder ("" when none was written)

    @property
    def smaller(self) -> float:
        """The smaller share: a short partial submission inside a long one shares little of the long one."""
        return min(self.a_in_b, self.b_in_a)

    @property
    def score(self) -> float:
        """What the rows are ranked by: the smaller share weighted by the shared length."""
        return self.smaller * self.length


@dataclass(frozen=True)
class Index:
    units: list[tuple[str, ...]]  # each distinct submission's students
    own: list[np.ndarray]  # each unit's own fingerprints (sorted, unique, common ones left out)
    sizes: np.ndarray  # each unit's count of own fingerprints
    lengths: np.ndarray  # each unit's own fingerprints weighed (:func:`weight`): a group's shared length
    limit: int  # more units than this holding a fingerprint make it common
    common: int  # fingerprints left out as common
    empty: tuple[str, ...]  # students with no fingerprint of their own (the stubs, boilerplate, nothing)


def common_limit(students: int, max_share: float) -> int:
    """How many submissions may hold a passage before it counts as common: ``max_share`` of the class, at least
    :data:`FLOOR`."""
    return max(FLOOR, int(max_share * students))


def build(raw: dict[str, np.ndarray], max_share: float) -> Index:
    """The index of ``raw`` (``{student: sorted unique fingerprints, boilerplate removed}``)."""
    groups: dict[bytes, list[str]] = {}
    for student in sorted(raw):
        if len(raw[student]):
            groups.setdefault(raw[student].tobytes(), []).append(student)
    units = sorted(tuple(members) for members in groups.values())
    held = [raw[members[0]] for members in units]
    limit = common_limit(len(raw), max_share)
    values, counts = np.unique(np.concatenate(held) if held else np.zeros(0, np.uint64), return_counts=True)
    common = values[counts > limit]
    own = [np.setdiff1d(hashes, common, assume_unique=True) for hashes in held]
    lengths = np.array([int(weight(counts[np.searchsorted(values, hashes)]).sum()) for hashes in own],
                       dtype=np.int64)
    empty = tuple(student for student in sorted(raw) if not len(raw[student]))
    sizes = np.array([len(hashes) for hashes in own], dtype=np.int64)
    return Index(units, own, sizes, lengths, limit, len(common), empty)


def _sum(codes: list[tuple[np.ndarray, int]], done: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    pending = np.concatenate([chunk for chunk, _ in codes])
    weights = np.concatenate([np.full(len(chunk), each, dtype=np.int64) for chunk, each in codes])
    values, inverse = np.unique(np.concatenate([done[0], pending]), return_inverse=True)
    counts = np.bincount(inverse, weights=np.concatenate([done[1], np.ones(len(pending), np.int64)]),
                         minlength=len(values))
    # float64 sums of integers below 2**53 are exact, in any order
    lengths = np.bincount(inverse, weights=np.concatenate([done[2], weights]), minlength=len(values))
    return values, counts.astype(np.int64), lengths.astype(np.int64)


def count_pairs(index: Index) -> tuple[np.ndarray, ...]:
    """``(a, b, shared, length)``: the units ``a < b`` that share an own fingerprint, how many and their weighed
    length, sorted by ``(a, b)``. Each fingerprint's posting list gives its pairs, so the work is the sum of the
    lists' squares, never every pair of the class."""
    count = len(index.units)
    sizes = index.sizes
    hashes = np.concatenate(index.own) if count else np.zeros(0, np.uint64)
    units = np.repeat(np.arange(count, dtype=np.int64), sizes)
    order = np.argsort(hashes, kind="stable")  # stable: each posting list's units stay ascending
    hashes, units = hashes[order], units[order]
    starts = np.flatnonzero(np.r_[True, hashes[1:] != hashes[:-1]]) if len(hashes) else np.zeros(0, np.int64)
    holders = np.diff(np.r_[starts, len(hashes)])
    done = (np.zeros(0, np.int64),) * 3
    codes, held = [], 0
    for holding in np.unique(holders[holders >= 2]):
        each = int(weight(holding))
        lists = units[starts[holders == holding][:, None] + np.arange(holding)]  # one posting list a row
        for column in range(holding - 1):
            first = np.repeat(lists[:, column], holding - 1 - column)
            codes.append((first * count + lists[:, column + 1:].ravel(), each))
            held += len(first)
            if held > _FLUSH:  # memory stays bounded however long the lists
                done, codes, held = _sum(codes, done), [], 0
    if codes:
        done = _sum(codes, done)
    values, shared, lengths = done
    units_count = max(count, 1)
    return ((values // units_count).astype(np.int32), (values % units_count).astype(np.int32),
            shared.astype(np.int32), lengths)


def rank(index: Index, a: np.ndarray, b: np.ndarray, shared: np.ndarray, length: np.ndarray) -> np.ndarray:
    """Every row's ``(a, b, shared, length)`` (units; a group of identical submissions is the row ``(u, u, own,
    own length)``), ordered: score (the smaller share times the length) highest first, then the shared count,
    then ids."""
    sizes = index.sizes
    groups = np.array([unit for unit, members in enumerate(index.units) if len(members) > 1], dtype=np.int64)
    a = np.concatenate([a.astype(np.int64), groups])
    b = np.concatenate([b.astype(np.int64), groups])
    shared = np.concatenate([shared.astype(np.int64), sizes[groups]])
    length = np.concatenate([length.astype(np.int64), index.lengths[groups]])
    smaller = np.where(a == b, 1.0, shared / np.maximum(np.maximum(sizes[a], sizes[b]), 1))
    order = np.lexsort((b, a, -shared, -(smaller * length)))
    return np.stack([a, b, shared, length], axis=1)[order] if len(order) else np.zeros((0, 4), np.int64)


def pair(index: Index, row: np.ndarray) -> Pair:
    """The report's row for one ranked ``(a, b, shared, length)``."""
    a, b, shared, length = (int(value) for value in row)
    first, second = index.units[a], index.units[b]
    if a == b:
        return Pair(first[0], first[1], 1.0, 1.0, shared=shared, length=length / ONE, same_as_a=first[2:],
                    identical=True)
    sizes = index.sizes
    return Pair(first[0], second[0], shared / max(int(sizes[a]), 1), shared / max(int(sizes[b]), 1),
                shared=shared, length=length / ONE, same_as_a=first[1:], same_as_b=second[1:])
