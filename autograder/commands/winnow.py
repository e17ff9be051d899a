"""Fingerprints of a source text for the similarity report: normalised tokens, hashed k-grams, winnowing.

A text is tokenised (one pattern for Python's tokens, which never fails on broken code), then normalised
so that what a copier changes cheaply counts for nothing: comments and line breaks are dropped, every string is
``S``, and every name a student chose is ``N``. Names that say what the code does stay: keywords, builtins,
names the file imports and attributes (``.transpose``) other than the student's own on ``self``/``cls``.

Every run of :data:`K` tokens (a k-gram) is hashed; winnowing (Schleimer, Wilkerson and Aiken, 2003) keeps the
smallest hash of each :data:`W` consecutive k-grams, so any passage of ``K + W - 1`` tokens or more that two texts
share gives both at least one common fingerprint, while only about ``2 / (W + 1)`` of the k-grams are kept.
Hashes are fixed numbers (no per-process salt), so shards on other machines compute the same ones. Here in the
commands layer, not in intake: intake's code counts in the grader's fingerprint, and this decides no grade.
"""

from __future__ import annotations

import builtins
import keyword
import re
import zlib
from dataclasses import dataclass

import numpy as np

K = 12  # tokens per k-gram: about one line of code
W = 8  # k-grams per window: every shared run of K + W - 1 = 19 tokens is found
KEPT = frozenset(keyword.kwlist) | frozenset(keyword.softkwlist) | frozenset(dir(builtins))
OWNERS = {"self", "cls"}  # an attribute of these is a name the student chose
# Python's tokens as one pattern (its own tokenizer is pure Python, several times slower, and stops at the first
# broken line): an unterminated string or an odd character is one more token, never an error.
_TOKEN = re.compile(r"""
    (?P<newline>\n)
  | (?P<space>[ \t\f\r]+|\\\r?\n)
  | (?P<comment>\#[^\n]*)
  | (?P<string>(?:[rRbBfFuU]{1,2})?(?:'{3}(?:\\[\s\S]|[^\\])*?(?:'{3}|\Z)|"{3}(?:\\[\s\S]|[^\\])*?(?:"{3}|\Z)
                 |'(?:\\.|[^\\\n'])*'?|"(?:\\.|[^\\\n"])*"?))
  | (?P<name>[^\W\d]\w*)
  | (?P<number>\.?\d(?:[\w.]|(?<=[eE])[-+])*)
  | (?P<op>\*\*=?|//=?|>>=?|<<=?|->|:=|\.\.\.|[-+*/%@&|^=!<>]=|[^\s\w])
""", re.VERBOSE)
_OPEN, _CLOSE = "([{", ")]}"
_MASK = (1 << 64) - 1
_PRIME = np.uint64(0x100000001B3)


@dataclass(frozen=True)
class Prints:
    """A text's fingerprints: each kept k-gram's hash and the lines (1-based) its first and last tokens are on."""

    hashes: np.ndarray  # uint64
    first: np.ndarray  # int32
    last: np.ndarray  # int32


def normalised(text: str) -> tuple[list[str], list[int]]:
    """The normalised tokens of ``text`` and the line each is on."""
    raw, line, depth = [], 1, 0  # (kind, text, line); a statement ends at a line break outside brackets
    for match in _TOKEN.finditer(text):
        kind, string = match.lastgroup, match.group()
        if kind == "newline":
            if depth == 0:
                raw.append(("end", "", line))
            line += 1
            continue
        if kind in ("space", "comment"):
            line += string.count("\n")
            continue
        if kind == "op":
            depth = depth + 1 if string in _OPEN else max(depth - 1, 0) if string in _CLOSE else depth
            if string == ";":
                kind = "end"
        raw.append((kind, string, line))
        line += string.count("\n")  # a string across lines
    imported, in_import = set(), False
    for kind, string, _ in raw:  # the names an import statement binds are the API, not the student's choice
        if kind == "end":
            in_import = False
        elif kind == "name" and string in ("import", "from"):
            in_import = True
        elif in_import and kind == "name":
            imported.add(string)
    raw = [token for token in raw if token[0] != "end"]
    tokens, lines = [], []
    for index, (kind, string, line) in enumerate(raw):
        if kind == "string":
            string = "S"
        elif kind == "name" and string not in KEPT and string not in imported:
            after_dot = index > 0 and raw[index - 1][1] == "."
            if not after_dot or (index > 1 and raw[index - 2][1] in OWNERS):
                string = "N"
        tokens.append(string)
        lines.append(line)
    return tokens, lines


_CODES: dict[str, int] = {}


def _code(token: str) -> int:
    code = _CODES.get(token)
    if code is None:  # crc32: the same number in every process (str's hash is salted per process)
        code = zlib.crc32(token.encode("utf-8", "surrogatepass")) + 1
        if len(_CODES) < 1 << 16:  # a file of a million distinct numbers must not fill memory
            _CODES[token] = code
    return code


def _mix(values: np.ndarray) -> np.ndarray:
    # splitmix64's finaliser: k-gram sums spread over all 64 bits, so a window's minimum is any of its k-grams
    values = values ^ (values >> np.uint64(30))
    values = values * np.uint64(0xBF58476D1CE4E5B9)
    values = values ^ (values >> np.uint64(27))
    values = values * np.uint64(0x94D049BB133111EB)
    return values ^ (values >> np.uint64(31))


def kgram_hashes(tokens: list[str]) -> np.ndarray:
    """The hash of every run of :data:`K` tokens, in order (none for a text shorter than ``K`` tokens)."""
    if len(tokens) < K:
        return np.zeros(0, dtype=np.uint64)
    codes = np.array([_code(token) for token in tokens], dtype=np.uint64)
    count = len(tokens) - K + 1
    total = np.zeros(count, dtype=np.uint64)
    with np.errstate(over="ignore"):  # arithmetic modulo 2**64 is the point
        for offset in range(K):
            total = total * _PRIME + codes[offset:offset + count]
        return _mix(total)


def all_hashes(text: str) -> np.ndarray:
    """Every k-gram hash of ``text``, sorted and unique: boilerplate is removed wherever it occurs, not only where
    the boilerplate's own winnowing happened to keep a fingerprint."""
    return np.unique(kgram_hashes(normalised(text)[0]))


def _beside(hashes: np.ndarray, boilerplate: np.ndarray, tokens: int) -> np.ndarray:
    """Which k-grams hold a token of a boilerplate k-gram: a k-gram half in the stubs (a stub's signature and a
    student's first line) is not the student's, and would match everyone who wrote that line."""
    given = np.isin(hashes, boilerplate)
    steps = np.zeros(tokens + 1, dtype=np.int64)
    np.add.at(steps, np.flatnonzero(given), 1)
    np.add.at(steps, np.flatnonzero(given) + K, -1)
    covered = np.cumsum(steps[:tokens]) > 0
    running = np.r_[0, np.cumsum(covered)]
    return running[K:K + len(hashes)] - running[:len(hashes)] > 0


def fingerprints(text: str, boilerplate: np.ndarray | None = None) -> Prints:
    """``text``'s winnowed fingerprints, leaving out every k-gram that holds a token of one of ``boilerplate``'s
    (sorted hashes: the stubs', the posted code's): only what the student wrote counts."""
    tokens, lines = normalised(text)
    hashes = kgram_hashes(tokens)
    empty = np.zeros(0, dtype=np.int32)
    if len(hashes) == 0:
        return Prints(np.zeros(0, dtype=np.uint64), empty, empty)
    given = (_beside(hashes, boilerplate, len(tokens)) if boilerplate is not None and len(boilerplate)
             else np.zeros(len(hashes), dtype=bool))
    ranked = np.where(given, np.uint64(_MASK), hashes)  # never a window's minimum while one of its own is there
    if len(hashes) <= W:
        kept = np.array([int(np.argmin(ranked))])
    else:
        windows = np.lib.stride_tricks.sliding_window_view(ranked, W)
        kept = np.unique(np.argmin(windows, axis=1) + np.arange(len(windows)))
    kept = kept[~given[kept]]
    line_of = np.asarray(lines, dtype=np.int32)
    return Prints(hashes[kept], line_of[kept], line_of[kept + K - 1])
