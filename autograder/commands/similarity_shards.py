"""``similarity --shard I/N`` and ``--merge``: a shard reads and fingerprints every N-th student of the sorted
class (reading through intake and tokenising are most of a run: about 15 of its 24 s at 2,000 students) and
writes their fingerprints to ``similarity-shard-I-of-N.npz``; the merge checks the shards make one whole class
(the same students as the class folder now holds, each once, fingerprinted by this kit with the same
boilerplate) and goes on as one run would, from the index on (``--max-share`` is the merge's). Each student's
files' SHA-256 travels along, so the few files the side-by-side pages show are read again and must be the same.

The file holds numbers and one JSON text, read with ``allow_pickle=False``: nothing in it is ever run."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import KitError
from .winnow import K, W, Prints

FORMAT = 1
NAME = "similarity-shard-{}-of-{}.npz"


def digest(files: dict[str, bytes]) -> str:
    """One student's files, as a SHA-256 over their names and bytes."""
    whole = hashlib.sha256()
    for module in sorted(files):
        whole.update(f"{len(module)}:{module}:{len(files[module])}:".encode() + files[module])
    return whole.hexdigest()


def _identity(boilerplate: np.ndarray) -> dict:
    return {"format": FORMAT, "k": K, "w": W,
            "boilerplate": hashlib.sha256(boilerplate.astype("<u8").tobytes()).hexdigest()}


def write(out_dir: Path, shard: tuple[int, int], everyone: list[str], prints: dict[str, dict[str, Prints]],
          digests: dict[str, str], boilerplate: np.ndarray) -> Path:
    """Write shard ``(I, N)``'s fingerprints (``prints``: its students') into ``out_dir``; return the file."""
    students = sorted(prints)
    modules = sorted({module for files in prints.values() for module in files})
    parts = [(owner, modules.index(module), found) for owner, student in enumerate(students)
             for module, found in sorted(prints[student].items())]
    meta = {**_identity(boilerplate), "shard": shard[0], "shards": shard[1], "class": everyone,
            "students": students, "modules": modules, "digests": [digests[student] for student in students]}
    arrays = {"owner": np.concatenate([np.full(len(found.hashes), owner, np.int32) for owner, _, found in parts]
                                      or [np.zeros(0, np.int32)]),
              "module": np.concatenate([np.full(len(found.hashes), module, np.int32) for _, module, found in parts]
                                       or [np.zeros(0, np.int32)]),
              **{name: np.concatenate([getattr(found, name) for _, _, found in parts] or [np.zeros(0, dtype)])
                 for name, dtype in (("hashes", np.uint64), ("first", np.int32), ("last", np.int32))}}
    path = out_dir / NAME.format(*shard)
    temporary = out_dir / f".{path.name}.tmp.npz"
    np.savez_compressed(temporary, meta=np.array(json.dumps(meta)), **arrays)
    temporary.replace(path)
    return path


def _files(sources: Sequence[str | Path]) -> list[Path]:
    found = []
    for source in map(Path, sources):
        here = sorted(source.glob(NAME.format("*", "*"))) if source.is_dir() else [source]
        if not here or not all(path.is_file() for path in here):
            raise KitError(f"--merge {source}: no similarity shard file there ({NAME.format('I', 'N')})")
        found += here
    return found


def _load(path: Path) -> tuple[dict, dict[str, np.ndarray]]:
    try:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            arrays = {name: np.asarray(data[name]) for name in ("owner", "module", "hashes", "first", "last")}
        students, modules = list(meta["students"]), list(meta["modules"])
        owner, module = arrays["owner"].astype(np.int64), arrays["module"].astype(np.int64)
        sizes = {len(array) for array in arrays.values()}
        if len(sizes) != 1 or len(meta["digests"]) != len(students) or (len(owner) and not (
                owner.min() >= 0 and owner.max() < len(students) and module.min() >= 0
                and module.max() < len(modules))):
            raise ValueError("its arrays do not fit together")
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise KitError(f"--merge {path}: not a similarity shard file ({error})") from None
    return meta, arrays


def read(sources: Sequence[str | Path], everyone: list[str], boilerplate: np.ndarray
         ) -> tuple[dict[str, dict[str, Prints]], dict[str, str]]:
    """Every student's fingerprints and files' digest from the shard files (or folders) ``sources``, checked."""
    prints: dict[str, dict[str, Prints]] = {}
    digests: dict[str, str] = {}
    seen: dict[int, Path] = {}
    counts = set()
    for path in _files(sources):
        meta, arrays = _load(path)
        if {key: meta.get(key) for key in _identity(boilerplate)} != _identity(boilerplate):
            raise KitError(f"--merge {path}: computed with other --boilerplate files or by another kit version; "
                           "run every shard again with the same ones")
        if meta.get("class") != everyone:
            raise KitError(f"--merge {path}: its class folder held other students than {len(everyone)} now there; "
                           "run every shard again")
        shard, count = int(meta["shard"]), int(meta["shards"])
        if shard in seen:
            raise KitError(f"--merge: shard {shard}/{count} given twice ({seen[shard]} and {path})")
        seen[shard] = path
        counts.add(count)
        modules = len(meta["modules"])
        key = arrays["owner"].astype(np.int64) * modules + arrays["module"]
        order = np.argsort(key, kind="stable")  # each student's, module by module, in the order written
        key = key[order]
        fields = [arrays[field][order] for field in ("hashes", "first", "last")]
        for number, student in enumerate(meta["students"]):
            digests[student] = str(meta["digests"][number])
            prints[student] = {}
            for index, name in enumerate(meta["modules"]):
                low, high = np.searchsorted(key, [number * modules + index, number * modules + index + 1])
                if high > low:
                    prints[student][name] = Prints(*(field[low:high] for field in fields))
    if len(counts) != 1 or set(seen) != set(range(1, max(counts) + 1)) or sorted(prints) != everyone:
        missing = sorted(set(range(1, max(counts) + 1)) - set(seen))
        raise KitError(f"--merge: the shards do not make one whole class (shard counts {sorted(counts)}, "
                       f"missing shards {missing or 'none'})")
    return prints, digests
