"""Every cell of every CSV the kit writes, made inert for a spreadsheet (OWASP's rule against CSV injection).

A spreadsheet reads a cell that begins with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return as a formula:
a student id such as ``=HYPERLINK("http://x","y")`` or ``-1+2`` would run when the instructor opens the
gradebook. Such a cell is written with a leading ``'``, the spreadsheet's own "this is text" mark, which it does
not show. A cell that already begins with ``'`` gets one more, so :func:`original` undoes :func:`cell` exactly and
the spreadsheet still shows the text as written (``''x`` shows ``'x``).

Numbers are another matter: a value the kit computed (a score, a maximum, a share) is passed as a number, not
text, and written as one (``-1`` stays ``-1``, a number, never a formula), so sums and sorts keep working.
Scores are never negative today; should one be, it is still a number the kit wrote, not text from outside.
Everything that is text (ids, notes, names made from ids) goes through the rule, whatever it looks like.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable

# OWASP's formula triggers, and the text mark itself (so that every cell written can be read back exactly).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
TEXT_MARK = "'"


def cell(value: str | float) -> str:
    """One CSV cell: a number (``int``/``float``) as ``{:g}``; text with :data:`TEXT_MARK` put before it when it
    begins with a formula trigger (or with the mark itself)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:g}"
    text = str(value)
    return TEXT_MARK + text if text.startswith((*FORMULA_START, TEXT_MARK)) else text


def row(values: Iterable[str | float]) -> list[str]:
    """A row of :func:`cell` s."""
    return [cell(value) for value in values]


def original(text: str) -> str:
    """A text cell of the kit's CSV as it was before :func:`cell` (a reader that needs the real id)."""
    return text[1:] if text.startswith(TEXT_MARK) else text


def table(header: list[str], rows: Iterable[Iterable[str | float]]) -> str:
    """The whole CSV file, every cell through :func:`cell`: the one way the kit writes a CSV. Its line ends are
    RFC 4180's ``\\r\\n``, since Python's writer quotes a cell holding a character of its line end only: with
    ``\\n`` alone, an id holding a carriage return would split its row for every reader."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(row(header))
    writer.writerows(row(values) for values in rows)
    return buffer.getvalue()
