"""The similarity report's side-by-side pages: one HTML page per top row (``similarity/pair-NNN.html``), each
student's files next to each other, every matched line marked with its region's number and colour (the same
number on both sides), and a table of the regions with links to where each starts.

Everything on a page that came from a student (code, ids) is escaped; control characters, bidirectional overrides
and line separators are shown as escapes, so the code reads as it is; the page's Content-Security-Policy forbids
scripts, plugins, frames, forms and every fetch (its style is inline), so nothing in it can run or call out."""

from __future__ import annotations

import html
from pathlib import Path

from ..records.results import write_atomic
from .escape import file_text, visible

FOLDER = "similarity"
CSP = ("default-src 'none'; script-src 'none'; object-src 'none'; style-src 'unsafe-inline'; img-src 'none'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
COLOURS = ("#ffd8a8", "#b2f2bb", "#a5d8ff", "#fcc2d7", "#d0bfff", "#ffec99", "#99e9f2", "#e9ecef")
STYLE = ("body{font-family:sans-serif;margin:1em}table.side{border-collapse:collapse;width:100%;table-layout:fixed}"
         "table.side td,table.side th{vertical-align:top;border:1px solid #ccc;padding:4px;width:50%}"
         "pre{margin:0;font-size:12px;white-space:pre-wrap;overflow-wrap:anywhere}.n{color:#888}"
         ".r{font-weight:bold}" + "".join(f".c{index}{{background:{colour}}}" for index, colour in enumerate(COLOURS)))


def page_name(number: int) -> str:
    """The page of the report's row ``number``, relative to the output folder."""
    return f"{FOLDER}/pair-{number:03d}.html"


def clear(out_dir: Path) -> None:
    """Remove the pages an earlier run wrote (this run may show fewer rows)."""
    for path in (Path(out_dir) / FOLDER).glob("pair-*.html"):
        path.unlink()


def _id(student: str) -> str:
    return html.escape(visible(student))


def _code(text: str) -> str:
    shown = file_text(text).replace("\u2028", "\\u2028").replace("\u2029", "\\u2029").replace("\r", "\\r")
    return html.escape(shown)


def _runs(marks: dict[str, dict[int, int]]) -> dict[int, list[tuple[str, int, int]]]:
    """Each region's ``(module, first line, last line)`` runs."""
    runs: dict[int, list[tuple[str, int, int]]] = {}
    for module in sorted(marks):
        for line in sorted(marks[module]):
            region = marks[module][line]
            spans = runs.setdefault(region, [])
            if spans and spans[-1][0] == module and spans[-1][2] == line - 1:
                spans[-1] = (module, spans[-1][1], line)
            else:
                spans.append((module, line, line))
    return runs


def _listing(side: str, module: str, text: str, marks: dict[int, int]) -> str:
    lines = []
    for number, line in enumerate(text.split("\n"), 1):
        region = marks.get(number)
        anchor = f' id="{side}-{html.escape(module)}-{number}"'
        if region is None:
            lines.append(f'<span{anchor}><span class="n">{number:4d}      </span>{_code(line)}</span>')
        else:
            lines.append(f'<span{anchor} class="c{(region - 1) % len(COLOURS)}"><span class="n">{number:4d} </span>'
                         f'<span class="r">[{region:2d}]</span> {_code(line)}</span>')
    return "<pre>" + "\n".join(lines) + "</pre>"


def _where(side: str, spans: list[tuple[str, int, int]]) -> str:
    return ", ".join(f'<a href="#{side}-{html.escape(module)}-{first}">{html.escape(module)} {first}'
                     f'{"" if first == last else f"–{last}"}</a>' for module, first, last in spans)


def render(number: int, pair, first: dict[str, str], second: dict[str, str], marks_a: dict[str, dict[int, int]],
           marks_b: dict[str, dict[int, int]]) -> str:
    """The page of row ``number``: ``pair`` (a report row), each student's ``{module: text}`` and matched lines."""
    a, b = _id(pair.a), _id(pair.b)
    others = ", ".join(_id(student) for student in pair.same_as_a)
    if pair.identical:
        what = f"{a}, {b}{', ' + others if others else ''} handed in the same code (after normalising)."
    else:
        what = (f"{pair.shared} fingerprints shared: {pair.a_in_b:.0%} of {a}'s own code is in {b}'s, "
                f"{pair.b_in_a:.0%} of {b}'s in {a}'s.")
        for student, same in ((a, pair.same_as_a), (b, pair.same_as_b)):
            if same:
                what += f" Identical to {student}'s: {', '.join(_id(other) for other in same)}."
    runs_a, runs_b = _runs(marks_a), _runs(marks_b)
    regions = "".join(f'<tr><td class="c{(region - 1) % len(COLOURS)}">{region}</td><td>{_where("a", runs_a[region])}'
                      f'</td><td>{_where("b", runs_b.get(region, []))}</td></tr>' for region in sorted(runs_a))
    body = [f"<h1>Row {number}: {a} and {b}</h1>", f"<p>{what} Lines of the same number and colour match "
            "(names, strings and comments aside; the released stubs, boilerplate and passages common to the class "
            "are not marked). A place to look, not a verdict.</p>", '<p><a href="../similarity.md">back to the '
            "report</a></p>"]
    if regions:
        body.append(f'<table class="side"><tr><th>region</th><th>{a}</th><th>{b}</th></tr>{regions}</table>')
    for module in sorted(set(first) | set(second)):
        sides = (("a", first, marks_a), ("b", second, marks_b))
        cells = [_listing(side, module, texts[module], marks.get(module, {})) if module in texts
                 else "<p>(not handed in)</p>" for side, texts, marks in sides]
        body.append(f'<h2>{html.escape(module)}</h2><table class="side"><tr><th>{a}</th><th>{b}</th></tr>'
                    f"<tr><td>{cells[0]}</td><td>{cells[1]}</td></tr></table>")
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            f"<title>Similarity row {number}</title><style>{STYLE}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def write_page(out_dir: Path, number: int, pair, first: dict[str, str], second: dict[str, str],
               marks_a: dict[str, dict[int, int]], marks_b: dict[str, dict[int, int]]) -> str:
    """Write row ``number``'s page into ``out_dir``; return its name relative to ``out_dir``."""
    name = page_name(number)
    write_atomic(Path(out_dir) / name, render(number, pair, first, second, marks_a, marks_b))
    return name
