"""The similarity report's picture: each submission's score with its closest match, as a histogram (Pillow, as
the class report's charts). Twenty bars with their counts, readable at any class size, where a heatmap of every
pair stops being readable past a few dozen students: the few submissions far to the right of the rest are the
ones to read."""

from __future__ import annotations

from pathlib import Path

from .png import save_png
from .rate_chart import MARGIN, fonts
from .score_chart import BAR, ticks

SIZE = (770, 400)
PLOT_LEFT, PLOT_BOTTOM = 70, 62
TITLE_TEXT = "Each submission's score with its closest match"
X_TEXT = "score: smaller share x shared length (rare passages weigh more), as ranked in similarity.md"
Y_TEXT = "submissions"
BINS = 20


def histogram(scores: list[float], path: str | Path) -> Path:
    """Each submission's best score in 20 bins from 0 to a round number above the highest, each bar's count over
    it, axes and title labelled; return the path."""
    from PIL import Image, ImageDraw

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text, title = fonts()
    score_ticks = ticks(max(scores, default=0.0) or 1.0)
    highest = score_ticks[-1]
    counts = [0] * BINS
    for score in scores:
        counts[min(BINS - 1, max(0, int(score / highest * BINS)))] += 1
    width, height = SIZE
    count_ticks = ticks(max(max(counts), 1), 5, whole=True)
    labels = max(text.getlength(f"{tick:g}") for tick in count_ticks)
    left, right = max(PLOT_LEFT, MARGIN + 24 + int(labels) + 8), width - MARGIN - 4
    top, bottom = MARGIN + 30, height - PLOT_BOTTOM
    scale_x, scale_y = (right - left) / BINS, (bottom - top) / count_ticks[-1]

    image = Image.new("RGB", SIZE, "white")
    draw = ImageDraw.Draw(image)
    draw.text(((left + right) // 2, MARGIN), TITLE_TEXT, font=title, fill="black", anchor="ma")
    for tick in count_ticks:
        y = bottom - round(tick * scale_y)
        draw.line((left, y, right, y), fill="#dddddd")
        draw.text((left - 6, y), f"{tick:g}", font=text, fill="black", anchor="rm")
    for number, count in enumerate(counts):
        if count:
            draw.rectangle((left + round(number * scale_x), bottom - round(count * scale_y),
                            left + round((number + 1) * scale_x), bottom), fill=BAR, outline="white")
            draw.text((left + round((number + 0.5) * scale_x), bottom - round(count * scale_y) - 2), f"{count}",
                      font=text, fill="black", anchor="mb")
    for tick in score_ticks:
        x = left + round(tick / highest * BINS * scale_x)
        draw.line((x, bottom, x, bottom + 4), fill="black")
        draw.text((x, bottom + 7), f"{tick:g}", font=text, fill="black", anchor="ma")
    draw.line((left, top, left, bottom), fill="black")
    draw.line((left, bottom, right, bottom), fill="black")
    draw.text(((left + right) // 2, bottom + 30), X_TEXT, font=text, fill="black", anchor="ma")
    label = Image.new("RGB", (int(text.getlength(Y_TEXT)) + 4, 20), "white")  # the y axis's, read upwards
    ImageDraw.Draw(label).text((2, 2), Y_TEXT, font=text, fill="black")
    label = label.rotate(90, expand=True)
    image.paste(label, (MARGIN - 4, (top + bottom - label.size[1]) // 2))
    return save_png(image, path)
