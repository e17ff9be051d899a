"""Seals on result records: an HMAC of a record's canonical JSON under a key only the judge holds.

A record is the grade of record only if the judge wrote it: a file edited afterwards (by hand, or by a process a
submission left behind in an unisolated run) no longer matches its seal. The key lives outside every output
folder, readable by its owner only (``$XDG_STATE_HOME/autograder/seal.key``, else
``~/.local/state/autograder/seal.key``, created 0600 on first use); ``AUTOGRADER_SEAL_KEY`` overrides it where
the machines that grade and the one that merges differ (sharded runs on GitHub Actions: a repository secret).
No worker ever sees it: its environment is scrubbed and its sandbox binds neither folder.

A seal binds a record to its file as well as to its content: the MAC covers the student the record names and the
file name it was saved under, so a sealed record copied over a classmate's file, or renamed, no longer verifies
(readers also check that the name is the one the student's id gives: ``results.load_record``). It binds no run or
output folder: shards graded on different machines under one key are merged by copying their files, and
``--resume`` keeps records from earlier runs, so a record must verify wherever its class's records go.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import tempfile
from pathlib import Path
from typing import Any

from ..errors import KitError

ENV = "AUTOGRADER_SEAL_KEY"
FIELD = "seal"  # in a record's extra_data
_PREFIX = "hmac-sha256:"


def key_path() -> Path:
    """Where the judge's key file lives (outside any output folder)."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "autograder" / "seal.key"


def _key() -> bytes:
    """The sealing key: ``AUTOGRADER_SEAL_KEY``'s text, else the key file's bytes (made on first use)."""
    text = os.environ.get(ENV, "")
    if text:
        if len(text) < 16:
            raise KitError(f"{ENV} is too short to be a key (use, for example, openssl rand -hex 32)")
        return text.encode("utf-8")
    path = key_path()
    try:
        key = path.read_bytes()
    except FileNotFoundError:
        key = _new_key(path)
    except OSError as error:
        raise KitError(f"the seal key {path} cannot be read: {os.strerror(error.errno or 0)}") from None
    if len(key) < 16:
        raise KitError(f"the seal key {path} is too short to be a key: remove it (a new one is made)")
    return key


def _new_key(path: Path) -> bytes:
    """Make the key file: written whole under another name, then linked into place, so that a judge starting
    at the same moment reads the whole key or makes none (the first link wins)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = secrets.token_hex(32).encode()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".seal-")  # 0600
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(key)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return path.read_bytes()
    finally:
        os.unlink(tmp)
    return key


def secret_seed(message: bytes) -> int:
    """A seed no submission can compute: an HMAC of ``message`` under the judge's key. The same message gets the
    same seed wherever the key is the same (every shard of a class, every rerun), so checks drawn from it stay
    a pure function of the submission; a worker sees what is drawn, never the key."""
    return int.from_bytes(hmac.new(_key(), b"draw\0" + message, hashlib.sha256).digest()[:8], "big")


def ready() -> None:
    """Make sure the key can be had (a KitError now, before any student is graded, rather than at the first save)."""
    _key()


def _canonical(record: dict[str, Any]) -> bytes:
    """The record's JSON, its seal left out, in one spelling (sorted keys, no spaces)."""
    extra = {key: value for key, value in (record.get("extra_data") or {}).items() if key != FIELD}
    body = dict(record, extra_data=extra)
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def _message(record: dict[str, Any], name: str) -> bytes:
    """What the MAC covers: the student the record names and the file ``name`` it sits under (said apart from
    the body, so that neither can be moved into the other), then the canonical record."""
    student = (record.get("extra_data") or {}).get("student")
    binding = json.dumps(["record", student, name], ensure_ascii=True).encode("ascii")
    return binding + b"\0" + _canonical(record)


def seal(record: dict[str, Any], name: str) -> dict[str, Any]:
    """``record`` (a result's JSON) with its seal in ``extra_data``, bound to the file ``name`` it is saved as."""
    mac = hmac.new(_key(), _message(record, name), hashlib.sha256).hexdigest()
    return dict(record, extra_data=dict(record.get("extra_data") or {}, **{FIELD: _PREFIX + mac}))


def is_sealed(record: Any, name: str) -> bool:
    """Whether ``record``, read from a file called ``name``, carries a seal this judge's key made for exactly
    this content under exactly this name."""
    if not isinstance(record, dict) or not isinstance(record.get("extra_data"), dict):
        return False
    claimed = record["extra_data"].get(FIELD)
    if not isinstance(claimed, str) or not claimed.startswith(_PREFIX):
        return False
    try:
        mac = hmac.new(_key(), _message(record, name), hashlib.sha256).hexdigest()
    except (TypeError, ValueError):  # not JSON this kit writes
        return False
    return hmac.compare_digest(claimed[len(_PREFIX):], mac)
