"""``python -m autograder similarity OUT --class CLASS_DIR``: which submissions are alike, found through an index
of fingerprints (only pairs that share one are ever scored), ranked, each top pair shown side by side.

Each student's module files are read the way ``grade`` reads them (intake: :func:`submission.read_submission`, so
links, devices and oversized files are refused the same way) from the class folder, in this trusted process: no
worker, no student code imported or run. Each file is fingerprinted (:mod:`.winnow`: names, strings and comments
normalised, so renaming variables or rewording comments changes nothing); every k-gram of the released stubs and
of each ``--boilerplate`` file is removed first, so only what students wrote counts, and a passage more than
``--max-share`` of the class holds is ignored as common (:mod:`.similarity_index`).

``--shard I/N`` fingerprints every N-th student and writes them to a file; ``--merge`` goes on from every
shard's file as one run would (:mod:`.similarity_shards`), to the same report.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ..errors import KitError
from ..intake.stubs import stub_files
from ..intake.submission import read_submission
from ..lesson.assignment import Assignment, resolve
from ..records.triage import printable
from . import similarity_index as index_module
from .handins import COMMITS
from .planning import discover, parse_shard
from ..intake.naming import safe_name
from ..records.record_files import read_results
from .similarity_index import Index, Pair  # noqa: F401 - Pair: the report's rows, named here for callers
from .winnow import Prints, all_hashes, fingerprints

MAX_SHARE = 0.1


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def released_stubs(assignment: Assignment) -> dict[str, bytes]:
    """The module files every student started from (the release), by module."""
    return stub_files(assignment.release, assignment.contract.modules)


def boilerplate(stubs: dict[str, bytes], extra: Sequence[str | Path] = ()) -> np.ndarray:
    """Every k-gram hash of the stubs and of the ``extra`` files (the lesson's posted code...), sorted."""
    texts = [_text(data) for data in stubs.values()]
    for path in extra:
        try:
            texts.append(_text(Path(path).read_bytes()))
        except OSError as error:
            raise KitError(f"--boilerplate {path}: cannot be read ({error.strerror or error})") from None
    return np.unique(np.concatenate([all_hashes(text) for text in texts] or [np.zeros(0, np.uint64)]))


def fingerprint_class(submissions: dict[str, dict[str, bytes]], common: np.ndarray
                      ) -> dict[str, dict[str, Prints]]:
    """Each student's fingerprints, by module, less the boilerplate ``common``."""
    return {student: {module: fingerprints(_text(data), common) for module, data in sorted(files.items())}
            for student, files in submissions.items()}


def index_of(prints: dict[str, dict[str, Prints]], max_share: float) -> Index:
    """The class's index (:func:`similarity_index.build`) from its fingerprints."""
    raw = {student: np.unique(np.concatenate([p.hashes for p in modules.values()] or [np.zeros(0, np.uint64)]))
           for student, modules in prints.items()}
    return index_module.build(raw, max_share)


def compare(submissions: dict[str, dict[str, bytes]], stubs: dict[str, bytes], max_share: float = MAX_SHARE,
            extra: Sequence[str | Path] = ()) -> list[Pair]:
    """Every row of ``submissions`` (``{student: {module: bytes}}``) that shares an own fingerprint, most alike
    first (a group of identical submissions is one row); ``stubs`` (``{module: bytes}``) is what every student was
    given. A pure function of the texts."""
    index = index_of(fingerprint_class(submissions, boilerplate(stubs, extra)), max_share)
    return [index_module.pair(index, row) for row in index_module.rank(index, *index_module.count_pairs(index))]


def graded_files(folder: Path, assignment: Assignment, stubs: dict[str, bytes]) -> dict[str, bytes]:
    """The module files ``grade`` graded in ``folder`` (the student's work over stubs left in place)."""
    return read_submission(folder, assignment.contract, stubs=stubs).files


def graded_folders(out_dir: Path, class_dir: str | Path, assignment: Assignment) -> dict[str, Path]:
    """``{student: folder}`` as ``grade`` read them: the class folder's own, except where the run's records say
    otherwise (a roster's match, named by the student's id; the commit graded at the deadline, under
    ``OUT/commits/``); a second folder of a student, and a student who handed in nothing, are left out."""
    folders = dict(discover(class_dir, out_dir, assignment.contract))
    if not (out_dir / "results").is_dir():
        return folders
    for _, record, problem in read_results(out_dir):
        handin = record.handin if record is not None and not problem else None
        if handin is None:
            continue
        for name in (handin.folder, *handin.also):
            folders.pop(name, None)
        if handin.absent:
            folders.pop(record.student, None)
        elif handin.commit is not None and handin.commit.sha:
            folders[record.student] = out_dir / COMMITS / safe_name(record.student)
        elif handin.folder:
            folders[record.student] = Path(class_dir) / handin.folder
    return folders


def similarity(out_dir: str | Path, class_dir: str | Path, assignment: Assignment | None = None, top: int = 30,
               emit: Callable[[str], None] = print, max_share: float | None = None,
               extra: Sequence[str | Path] = (), shard: str | None = None,
               merge: Sequence[str | Path] = ()) -> list[Pair]:
    """The ``similarity`` command: write ``similarity.md``, ``similarity.csv``, the side-by-side pages and
    ``figures/similarity.png`` into ``out_dir`` (a ``grade`` output folder) and link them from its ``report.md``;
    return the rows, most alike first. With ``shard`` (``"I/N"``) write that shard's fingerprints instead (and
    return []); with ``merge`` (shard files or folders) take the fingerprints from them."""
    from ..reports import similarity_report
    from . import similarity_shards
    from .similarity_views import views

    out_dir = Path(out_dir)
    max_share = MAX_SHARE if max_share is None else max_share
    if not 0 < max_share <= 1:
        raise KitError(f"--max-share must be a fraction above 0 and at most 1, got {max_share}")
    if shard and merge:
        raise KitError("--shard and --merge go in separate runs: the shards first, then one --merge")
    where = parse_shard(shard) if shard else None
    if where:
        out_dir.mkdir(parents=True, exist_ok=True)
    elif not out_dir.is_dir():
        raise KitError(f"no such output folder: {out_dir} (run grade first, or name its --out folder)")
    assignment = resolve(assignment)
    folders = graded_folders(out_dir, class_dir, assignment)
    if len(folders) < 2:
        raise KitError(f"{class_dir} holds {len(folders)} submission(s): nothing to compare")
    everyone = sorted(folders)
    stubs = released_stubs(assignment)
    common = boilerplate(stubs, extra)
    read: dict[str, dict[str, bytes]] = {}
    if merge:
        prints, digests = similarity_shards.read(merge, everyone, common)
    else:
        mine = everyone[where[0] - 1::where[1]] if where else everyone  # every N-th: even shards
        read = {student: graded_files(folders[student], assignment, stubs) for student in mine}
        prints = fingerprint_class(read, common)
        digests = {student: similarity_shards.digest(files) for student, files in read.items()}
    if where:
        path = similarity_shards.write(out_dir, where, everyone, prints, digests, common)
        emit(f"wrote {path} (shard {where[0]} of {where[1]}: {len(prints)} students; combine them with --merge)")
        return []

    def files_of(student: str) -> dict[str, bytes]:
        files = read.get(student) or graded_files(folders[student], assignment, stubs)
        if similarity_shards.digest(files) != digests[student]:
            raise KitError(f"{printable(student)}'s files changed since the shards read them: run them again")
        return files

    index = index_of(prints, max_share)
    rows = index_module.rank(index, *index_module.count_pairs(index))
    ranked = [index_module.pair(index, row) for row in rows]
    shown = views(ranked[:top], rows[:top], index, prints, files_of, out_dir)
    summary = similarity_report.Summary(students=len(everyone), units=len(index.units), limit=index.limit,
                                        common=index.common, empty=len(index.empty), max_share=max_share,
                                        floor=index_module.FLOOR, boilerplate=tuple(Path(path).name for path in extra))
    written = similarity_report.write(shown + ranked[top:], everyone, out_dir, top, summary=summary)
    for path in written:
        emit(f"wrote {path}")
    if ranked:
        # ids on the console: each control character as its escape (no retitled terminal, no erased line)
        emit(f"most alike: {printable(ranked[0].a)} and {printable(ranked[0].b)}, {ranked[0].smaller:.0%} "
             "(a place to look, not a verdict)")
    return shown + ranked[top:]
