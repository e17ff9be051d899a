"""Text from outside the kit (student ids, notes) made inert for the formats the reports write."""

import html
import re
import unicodedata

# Inline Markdown punctuation ("-" and "." matter only at a line start, where this text never stands).
_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+!|~])")


def plain(text: str) -> str:
    """``text`` as one line of plain text: whitespace runs made one space, control characters (and the
    bidirectional overrides that could make a line read other than it is) dropped; nothing else changes, since
    plain text has no markup to escape."""
    return " ".join("".join(" " if _control(char) else char for char in str(text)).split())


def _control(char: str) -> bool:
    return unicodedata.category(char) == "Cc" or "\u202a" <= char <= "\u202e" or "\u2066" <= char <= "\u2069"


def markdown(text: str) -> str:
    """``text`` as literal Markdown (and HTML) inline text: one line, Markdown's punctuation escaped, then HTML's
    ``& < >`` as entities, so an id like ``<script>`` or ``[x](javascript:...)`` shows as written."""
    one_line = " ".join(str(text).split())
    return html.escape(_MARKDOWN.sub(r"\\\1", one_line), quote=False)
