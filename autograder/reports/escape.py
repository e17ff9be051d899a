"""Text from outside the kit (student ids, notes) made inert for the formats the reports write."""

import html
import re

# Inline Markdown punctuation ("-" and "." matter only at a line start, where this text never stands).
_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+!|~])")


def plain(text: str) -> str:
    """``text`` as one line of plain text: whitespace runs made one space, control characters (and the
    bidirectional overrides that could make a line read other than it is) dropped; nothing else changes, since
    plain text has no markup to escape."""
    return " ".join(_CONTROL.sub(" ", str(text)).split())


# Unicode's control characters (category Cc: C0, DEL and C1, a set its stability policy fixes) and the
# bidirectional embeddings, overrides and isolates.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def markdown(text: str) -> str:
    """``text`` as literal Markdown (and HTML) inline text: one line, Markdown's punctuation escaped, then HTML's
    ``& < >`` as entities, so an id like ``<script>`` or ``[x](javascript:...)`` shows as written."""
    one_line = " ".join(str(text).split())
    return html.escape(_MARKDOWN.sub(r"\\\1", one_line), quote=False)
