"""Valid text: every string that enters the judge from outside it, made text that UTF-8 (and so every file,
pipe, terminal and report) can hold.

A Python ``str`` may hold surrogate code points (U+D800-U+DFFF), which no UTF-8 encoder writes: a JSON ``\\udc80``
escape reads as one, so does each byte of a folder name that is not UTF-8 (``os.listdir``'s ``surrogateescape``).
One of them in a student's record once stopped the whole class at the record's write. :func:`valid_text` replaces
each with U+FFFD; noncharacters (U+FFFE, U+FDD0...) are valid scalar values that UTF-8 and JSON carry, so they
stay. One function, used where text enters: a frame from a worker (:func:`worker.protocol.receive`), the worker's
error records and every text the judge bounds (``judge/failures.py``), a notebook's cells and outputs
(``notebook/cells.py``) and, last, a record before it is written (``records/results.py``). Nothing of the kit is
imported here: a worker sees this module.
"""

import re

REPLACEMENT = "\ufffd"
# Said in a record whose text was replaced (the judge's words; the submission's text is never quoted in it).
NOTE = "text from this submission held invalid characters (lone surrogates): each was replaced with U+FFFD"
_INVALID = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> str:
    """``text`` with every surrogate code point replaced by U+FFFD (the same object when there is none)."""
    return _INVALID.sub(REPLACEMENT, text) if _INVALID.search(text) is not None else text


def is_valid(text: str) -> bool:
    """Whether ``text`` holds no surrogate code point (UTF-8 can write it)."""
    return _INVALID.search(text) is None


def valid_tree(value):
    """``(value, replaced)``: a JSON-like tree (dicts, lists, tuples, scalars) with every string in it, keys too,
    made valid text, and whether any was changed. A tree that needed nothing is returned as it is."""
    found = [False]
    cleaned = _clean(value, found)
    return (cleaned, True) if found[0] else (value, False)


def _clean(value, found):
    if isinstance(value, str):
        if _INVALID.search(value) is None:
            return value
        found[0] = True
        return _INVALID.sub(REPLACEMENT, value)
    if isinstance(value, dict):
        return {_clean(key, found): _clean(item, found) for key, item in value.items()}
    if isinstance(value, list):
        return [_clean(item, found) for item in value]
    if isinstance(value, tuple):
        return tuple(_clean(item, found) for item in value)
    return value
