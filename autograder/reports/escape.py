"""Text from outside the kit (student ids, notes) made inert for the formats the reports write."""

import html
import re

# Inline Markdown punctuation ("-" and "." matter only at a line start, where this text never stands).
_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+!|~])")


def markdown(text: str) -> str:
    """``text`` as literal Markdown (and HTML) inline text: one line, Markdown's punctuation escaped, then HTML's
    ``& < >`` as entities, so an id like ``<script>`` or ``[x](javascript:...)`` shows as written."""
    one_line = " ".join(str(text).split())
    return html.escape(_MARKDOWN.sub(r"\\\1", one_line), quote=False)
