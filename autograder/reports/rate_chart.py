"""The class report's pass-rate chart, laid out here and drawn with Pillow.

Drawn with matplotlib, a chart of a whole rubric took about a second of CPU after the last student, nearly all of
it laying out and rasterizing its names' text, twice: the run's last step, on every grading run's wall time. Here
each name is measured once with the same DejaVu Sans matplotlib ships, the layout is plain arithmetic
(:func:`layout`, a pure function a test can read), and Pillow draws it in a few tens of milliseconds.
"""

from __future__ import annotations

import importlib.util
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .png import save_png

if TYPE_CHECKING:
    from PIL.ImageFont import FreeTypeFont

# matplotlib's "tab10": a part's bar has the colour it had in the kit's other pictures.
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")
WRAP = 70  # characters per line of a test's name; every name is shown in full
TEXT, TITLE = 13, 17  # font sizes, pixels
MARGIN, GAP = 16, 10  # around the picture; between a name and its bar, and between rows of the legend
BAR_WIDTH = 640  # pixels for 100%
PERCENT_WIDTH = 56  # room right of a full bar for its "100%"
TICKS = (0.0, 0.25, 0.5, 0.75, 1.0)
TITLE_TEXT = "Pass rate per test, hardest first"
AXIS_TEXT = "students passing"


@dataclass
class Row:
    """One test: its name's lines, its part's colour and its pass rate; ``top``/``height`` in pixels."""

    lines: list[str]
    group: str
    rate: float
    colour: str
    top: int = 0
    height: int = 0


@dataclass
class Layout:
    """Where everything goes, in pixels: ``size = (width, height)``; ``left``, the x of 0%; ``plot = (top,
    bottom)`` of the bars' area; ``legend``: ``(x, y, group, colour)`` per part."""

    size: tuple[int, int]
    left: int
    plot: tuple[int, int]
    title: list[str]
    rows: list[Row] = field(default_factory=list)
    legend: list[tuple[int, int, str, str]] = field(default_factory=list)


def _font_file(name: str) -> str | None:
    """A font matplotlib ships (found without importing matplotlib), or None."""
    spec = importlib.util.find_spec("matplotlib")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / "mpl-data" / "fonts" / "ttf" / name
        if path.is_file():
            return str(path)
    return None


def fonts() -> tuple[FreeTypeFont, FreeTypeFont]:
    """``(text, title)`` fonts: DejaVu Sans as matplotlib draws it, else Pillow's own scalable font."""
    from PIL import ImageFont

    def load(name: str, size: int) -> FreeTypeFont:
        path = _font_file(name)
        return ImageFont.truetype(path, size) if path else ImageFont.load_default(size)

    return load("DejaVuSans.ttf", TEXT), load("DejaVuSans-Bold.ttf", TITLE)


def layout(rates: list[tuple[str, str, float]], note: str, text: FreeTypeFont, title: FreeTypeFont) -> Layout:
    """Place the chart of ``rates = [(name, group, fraction)]``, hardest first (ties by name): the title and
    ``note``, a legend of the parts (in order of first appearance), then one row per test, its name right-aligned
    left of its bar and its percentage right of it, over an axis from 0% to 100%."""
    line = _height(text) + 3
    groups = list(dict.fromkeys(group for _, group, _ in rates))
    colour = {group: PALETTE[index % len(PALETTE)] for index, group in enumerate(groups)}
    rows = [Row(textwrap.wrap(name, WRAP) or [name], group, rate if rate == rate else 0.0, colour[group])
            for name, group, rate in sorted(rates, key=lambda item: (item[2], item[0]))]  # a NaN rate: none
    names = max((text.getlength(each) for row in rows for each in row.lines), default=0)
    left = MARGIN + int(names) + GAP
    legend = max((text.getlength(group) for group in groups), default=0) + text.getlength("part:") + line + 3 * GAP
    width = max(left + BAR_WIDTH + PERCENT_WIDTH, int(legend) + MARGIN) + MARGIN  # the widest legend entry fits
    heading = [TITLE_TEXT] + ([f"({' '.join(note.split())})"] if note else [])  # the note on one line
    y = MARGIN + len(heading) * (_height(title) + 4) + GAP
    chart = Layout((width, 0), left, (0, 0), heading)
    x = MARGIN + int(text.getlength("part:")) + GAP
    for group in groups:  # one line of entries, wrapped where the picture ends
        entry = line + 4 + int(text.getlength(group.replace("_", " "))) + 2 * GAP
        if x + entry > width - MARGIN and chart.legend:
            x, y = MARGIN + int(text.getlength("part:")) + GAP, y + line + 4
        chart.legend.append((x, y, group.replace("_", " "), colour[group]))
        x += entry
    top = y + line + 2 * GAP
    for row in rows:
        row.top, row.height = top, max(len(row.lines) * line, line) + 6
        top += row.height
    chart.rows, chart.plot = rows, (y + line + GAP, top + 4)
    chart.size = (width, top + 4 + 2 * line + 2 * GAP + MARGIN)
    return chart


def _height(font: FreeTypeFont) -> int:
    ascent, descent = font.getmetrics()
    return ascent + descent


def pass_rate_chart(rates: list[tuple[str, str, float]], path: str | Path, note: str = "") -> Path:
    """Horizontal bars, hardest first: the fraction of students passing each test, ``rates = [(name, group,
    fraction)]``; each bar coloured by its part, with a legend, every name in full (wrapped) and its percentage;
    ``note`` under the title (what the chart leaves out, such as written answers still pending). Return the path."""
    from PIL import Image, ImageDraw

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text, title = fonts()
    chart = layout(rates, note, text, title)
    image = Image.new("RGB", chart.size, "white")
    draw = ImageDraw.Draw(image)
    width = chart.size[0]
    y = MARGIN
    for heading, font in zip(chart.title, (title, text)):
        draw.text((width // 2, y), heading, font=font, fill="black", anchor="ma")
        y += _height(title) + 4
    if chart.legend:
        draw.text((MARGIN, chart.legend[0][1]), "part:", font=text, fill="black")
    square = _height(text)
    for x, y, group, colour in chart.legend:
        draw.rectangle((x, y + 2, x + square - 2, y + square), fill=colour)
        draw.text((x + square + 4, y), group, font=text, fill="black")
    top, bottom = chart.plot
    for tick in TICKS:  # grid lines under the bars, labelled below the axis
        x = chart.left + round(tick * BAR_WIDTH)
        draw.line((x, top, x, bottom), fill="#dddddd")
        draw.text((x, bottom + 6), f"{tick:.0%}", font=text, fill="black", anchor="ma")
    for row in chart.rows:
        middle = row.top + row.height // 2
        end = chart.left + round(min(max(row.rate, 0.0), 1.0) * BAR_WIDTH)
        if end > chart.left:
            draw.rectangle((chart.left, row.top + 2, end, row.top + row.height - 3), fill=row.colour)
        draw.multiline_text((chart.left - GAP, middle), "\n".join(row.lines), font=text, fill="black", anchor="rm",
                            align="right", spacing=3)
        draw.text((end + 5, middle), f"{row.rate:.0%}", font=text, fill="black", anchor="lm")
    draw.line((chart.left, top, chart.left, bottom), fill="black")
    draw.line((chart.left, bottom, chart.left + BAR_WIDTH + PERCENT_WIDTH // 2, bottom), fill="black")
    draw.text((chart.left + BAR_WIDTH // 2, bottom + 8 + square), AXIS_TEXT, font=text, fill="black", anchor="ma")
    return save_png(image, path)
