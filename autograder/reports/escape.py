"""Text from outside the kit (student ids, notes) made inert for the formats the reports write."""

import html
import re

# Inline Markdown punctuation ("-" and "." matter only at a line start, where this text never stands).
_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+!|~])")


# Unicode's control characters (category Cc: C0, DEL and C1, a set its stability policy fixes) and the
# bidirectional embeddings, overrides and isolates.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def visible(text: str) -> str:
    """``text`` with each control character (:data:`_CONTROL`, whitespace ones too) shown as its escape
    (``\\x1b``, ``\\t``, ``\\u202e``): an id in a report or on a console can neither retitle a terminal, erase
    a line nor hide among other ids, and still says what it holds. Everything else is left as it is."""
    return _CONTROL.sub(lambda found: ascii(found.group())[1:-1], str(text))


def plain(text: str) -> str:
    """``text`` as one line of plain text: whitespace runs made one space, control characters (and the
    bidirectional overrides that could make a line read other than it is) dropped; nothing else changes, since
    plain text has no markup to escape. An id goes through :func:`visible` first: it keeps what it holds."""
    return " ".join(_CONTROL.sub(" ", str(text)).split())


def markdown(text: str) -> str:
    """``text`` as literal Markdown (and HTML) inline text: one line without control characters (:func:`plain`),
    Markdown's punctuation escaped (a :func:`visible` escape's backslash too), then HTML's ``& < >`` as entities,
    so an id like ``<script>`` or ``[x](javascript:...)`` shows as written."""
    return html.escape(_MARKDOWN.sub(r"\\\1", plain(text)), quote=False)


# What a report file may keep of the controls: its line ends and tabs.
_CONTROL_IN_FILE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def file_text(text: str) -> str:
    """A whole report (Markdown or plain text) as written to its file: every control character but the line
    ends and tabs shown as its escape, whatever field it came in by (a carriage return or an escape sequence
    would act on a terminal that prints the file)."""
    return _CONTROL_IN_FILE.sub(lambda found: ascii(found.group())[1:-1], text)
