"""The class report's score histogram, drawn with Pillow as the pass-rate chart is (:mod:`.rate_chart`).

matplotlib took about 0.2 s of the run's last step for this one picture; here the bins are numpy's (the same
counts ``hist`` drew), the axes plain arithmetic (:func:`ticks`), and Pillow draws it in a few milliseconds.
"""

from __future__ import annotations

import math
from pathlib import Path

from .png import save_png
from .rate_chart import MARGIN, fonts

BAR = "#3b6ea8"
SIZE = (770, 385)  # pixels: the 7 x 3.5 inch, 110 dpi picture it was
PLOT_LEFT, PLOT_BOTTOM = 70, 58  # room for the y axis's labels, and below for the x axis's
TITLE_TEXT, COUNT_TEXT = "Score distribution", "students"


def bins(scores: list[float], max_score: float) -> tuple[list[int], list[float]]:
    """``(counts, edges)``: between 5 and 20 equal bins from 0 to ``max_score`` (1 when it is 0); a score outside
    that range is not counted, as in a histogram over it."""
    import numpy

    counts, edges = numpy.histogram(scores, bins=min(20, max(5, len(scores))), range=(0, max_score or 1))
    return [int(count) for count in counts], [float(edge) for edge in edges]


def ticks(top: float, most: int = 8, whole: bool = False) -> list[float]:
    """Round values from 0 up to at least ``top`` for an axis's labels: a step of 1, 2, 2.5 or 5 times a power of
    ten (``whole``: 1, 2 or 5 times one, at least 1), the smallest that needs at most ``most`` steps."""
    if not top > 0:
        return [0.0]
    power = 10.0 ** math.floor(math.log10(top / most))
    factors = (1, 2, 5, 10) if whole else (1, 2, 2.5, 5, 10)
    step = next(power * factor for factor in factors if top / (power * factor) <= most)
    step = max(step, 1.0) if whole else step
    return [round(index * step, 10) for index in range(math.ceil(top / step - 1e-9) + 1)]


def score_histogram(scores: list[float], max_score: float, path: str | Path) -> Path:
    """Histogram of the class's total scores, with its axes labelled; return the path."""
    from PIL import Image, ImageDraw

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text, title = fonts()
    counts, edges = bins(scores, max_score)
    width, height = SIZE
    count_ticks = ticks(max(max(counts, default=0), 1), 5, whole=True)
    labels = max(text.getlength(f"{tick:g}") for tick in count_ticks)  # the widest count, left of the axis
    left, right = max(PLOT_LEFT, MARGIN + 24 + int(labels) + 8), width - MARGIN - 4
    top, bottom = MARGIN + 30, height - PLOT_BOTTOM
    highest = count_ticks[-1]
    scale_x = (right - left) / (edges[-1] - edges[0])
    scale_y = (bottom - top) / highest

    image = Image.new("RGB", SIZE, "white")
    draw = ImageDraw.Draw(image)
    draw.text(((left + right) // 2, MARGIN), TITLE_TEXT, font=title, fill="black", anchor="ma")
    for tick in count_ticks:  # horizontal grid lines, labelled left of the axis
        y = bottom - round(tick * scale_y)
        draw.line((left, y, right, y), fill="#dddddd")
        draw.text((left - 6, y), f"{tick:g}", font=text, fill="black", anchor="rm")
    for count, low, high in zip(counts, edges, edges[1:]):
        if count:
            draw.rectangle((left + round((low - edges[0]) * scale_x), bottom - round(count * scale_y),
                            left + round((high - edges[0]) * scale_x), bottom), fill=BAR, outline="white")
    for tick in (tick for tick in ticks(edges[-1]) if tick <= edges[-1] + 1e-9):  # inside the axis
        x = left + round((tick - edges[0]) * scale_x)
        draw.line((x, bottom, x, bottom + 4), fill="black")
        draw.text((x, bottom + 7), f"{tick:g}", font=text, fill="black", anchor="ma")
    draw.line((left, top, left, bottom), fill="black")
    draw.line((left, bottom, right, bottom), fill="black")
    draw.text(((left + right) // 2, bottom + 28), f"score (of {max_score:g})", font=text, fill="black", anchor="ma")
    label = Image.new("RGB", (int(text.getlength(COUNT_TEXT)) + 4, 20), "white")  # the y axis's, read upwards
    ImageDraw.Draw(label).text((2, 2), COUNT_TEXT, font=text, fill="black")
    label = label.rotate(90, expand=True)
    image.paste(label, (MARGIN - 4, (top + bottom - label.size[1]) // 2))
    return save_png(image, path)
