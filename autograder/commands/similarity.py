"""``python -m autograder similarity OUT --class CLASS_DIR``: which submissions are alike, every pair compared.

Each student's module files are read the way ``grade`` reads them (intake: :func:`submission.read_files`, so
links, devices and oversized files are refused the same way) from the class folder, in this trusted process:
no worker, no student code imported or run. Each file is tokenized and fingerprinted with ``copydetect``
(winnowed k-grams of the code with names, strings and comments normalised, so renaming variables or rewording
comments changes nothing); the fingerprints of the released stubs (the docstrings, signatures and everything
else every student was given) are boilerplate and removed first, so only what students wrote counts.

A pair's similarity is the share of one student's own code found in the other's, each way. Small functions
written to one contract are naturally alike: a high score is a place to look, never a verdict.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

from ..lesson.assignment import Assignment, resolve
from ..errors import KitError
from .planning import discover
from ..intake.submission import read_files
from ..records.triage import printable

# copydetect's own defaults: matches shorter than NOISE characters of normalised code are ignored, and every
# match of GUARANTEE characters or more is found (equal thresholds: every k-gram kept, a window of one).
NOISE, GUARANTEE = 25, 25


@dataclass(frozen=True)
class Pair:
    """Two students and how much of each one's own code (stubs left out) is also in the other's, per file."""

    a: str
    b: str
    a_in_b: float  # share of a's own code found in b's
    b_in_a: float
    by_file: tuple[tuple[str, float], ...]  # (module, the larger share of the two, in that file)

    @property
    def score(self) -> float:
        """The larger share: someone who copied a part of a longer submission is found as well as the author."""
        return max(self.a_in_b, self.b_in_a)


def _fingerprint(name: str, code: str, boilerplate: frozenset):
    """copydetect's fingerprint of ``code`` with the boilerplate's hashes removed (here, not by copydetect, whose
    own removal also drops a file's hashes that merely repeat within it)."""
    from copydetect import CodeFingerprint
    from copydetect.utils import get_token_coverage

    fingerprint = CodeFingerprint(name, NOISE, GUARANTEE - NOISE + 1, fp=io.StringIO(code), language="python")
    if boilerplate:
        fingerprint.hashes = fingerprint.hashes - boilerplate
        fingerprint.hash_idx = {key: value for key, value in fingerprint.hash_idx.items() if key not in boilerplate}
        fingerprint.token_coverage = get_token_coverage(fingerprint.hash_idx, NOISE, len(fingerprint.filtered_code))
    return fingerprint


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def compare(submissions: dict[str, dict[str, bytes]], stubs: dict[str, bytes]) -> list[Pair]:
    """Every pair of ``submissions`` (``{student: {module: bytes}}``), most alike first; ``stubs`` (``{module:
    bytes}``) is what every student was given. A pure function of the texts."""
    from copydetect import compare_files

    boilerplate = {module: frozenset(_fingerprint(f"{module}.py", _text(data), frozenset()).hashes)
                   for module, data in stubs.items()}
    prints = {student: {module: _fingerprint(f"{module}.py", _text(data), boilerplate.get(module, frozenset()))
                        for module, data in files.items()}
              for student, files in submissions.items()}
    pairs = []
    for a, b in combinations(sorted(prints), 2):
        shared_a = shared_b = own_a = own_b = 0.0
        by_file = []
        for module in sorted(set(prints[a]) | set(prints[b])):
            first, second = prints[a].get(module), prints[b].get(module)
            own_a += first.token_coverage if first else 0
            own_b += second.token_coverage if second else 0
            if first is None or second is None or not first.hashes & second.hashes:
                continue
            _, (in_second, in_first), _ = compare_files(first, second)
            shared_a += in_second * first.token_coverage
            shared_b += in_first * second.token_coverage
            by_file.append((module, float(max(in_second, in_first))))
        pairs.append(Pair(a, b, shared_a / own_a if own_a else 0.0, shared_b / own_b if own_b else 0.0,
                          tuple(by_file)))
    return sorted(pairs, key=lambda pair: (-pair.score, pair.a, pair.b))


def read_class(class_dir: str | Path, assignment: Assignment, out_dir: str | Path | None = None
               ) -> dict[str, dict[str, bytes]]:
    """``{student: {module: bytes}}`` for every student folder ``grade`` would find in ``class_dir``, read by
    intake (a refused file is left out, as grading leaves it out)."""
    return {student: read_files(folder, assignment.contract)[0]
            for student, folder in discover(class_dir, out_dir, assignment.contract)}


def released_stubs(assignment: Assignment) -> dict[str, bytes]:
    """The module files every student started from (the release), by module."""
    return {module: (assignment.release / f"{module}.py").read_bytes() for module in assignment.contract.modules
            if (assignment.release / f"{module}.py").is_file()}


def similarity(out_dir: str | Path, class_dir: str | Path, assignment: Assignment | None = None, top: int = 30,
               emit: Callable[[str], None] = print) -> list[Pair]:
    """The ``similarity`` command: compare every pair of ``class_dir``'s submissions, write ``similarity.md``,
    ``similarity.csv`` and ``figures/similarity.png`` into ``out_dir`` (a ``grade`` output folder), link them from
    its ``report.md``; return the pairs, most alike first."""
    from ..reports import similarity_report

    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        raise KitError(f"no such output folder: {out_dir} (run grade first, or name its --out folder)")
    assignment = resolve(assignment)
    submissions = read_class(class_dir, assignment, out_dir)
    if len(submissions) < 2:
        raise KitError(f"{class_dir} holds {len(submissions)} submission(s): nothing to compare")
    pairs = compare(submissions, released_stubs(assignment))
    for path in similarity_report.write(pairs, sorted(submissions), out_dir, top):
        emit(f"wrote {path}")
    if pairs:
        # ids on the console: each control character as its escape (no retitled terminal, no erased line)
        emit(f"most alike: {printable(pairs[0].a)} and {printable(pairs[0].b)}, {pairs[0].score:.0%} "
             "(a place to look, not a verdict)")
    return pairs
