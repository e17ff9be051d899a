"""The guides' figures are read without their code: every heatmap has a colour bar with its quantity, and axes
named for what they index (position and feature; query and key positions)."""

import os
from pathlib import Path

import matplotlib.figure

from autograder.reports.figures import Drawing, draw_aside, lesson_figures
from lesson import LESSON


def drawn(monkeypatch, draw):
    """The matplotlib figures ``draw()`` saves, as objects (their axes and labels can be read back)."""
    figures, save = [], matplotlib.figure.Figure.savefig

    def keep(figure, *args, **kwargs):
        figures.append(figure)
        return save(figure, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", keep)
    paths = draw()
    return dict(zip((path.name for path in paths), figures))


def parts(figure):
    """``(plot axes, colour bars)`` of a figure."""
    axes = figure.get_axes()
    return ([ax for ax in axes if ax.get_label() != "<colorbar>"], [ax for ax in axes if ax.get_label() == "<colorbar>"])


def test_the_lessons_heatmaps_have_colour_bars_and_named_axes(monkeypatch, tmp_path):
    figures = drawn(monkeypatch, lambda: lesson_figures(LESSON, tmp_path))
    assert set(figures) == {"positional_encoding.png", "attention_heads.png"}

    plots, bars = parts(figures["positional_encoding.png"])
    assert len(bars) == 1 and bars[0].get_ylabel() == "encoding value"
    assert plots[0].get_ylabel() == "position" and plots[0].get_xlabel().startswith("feature")

    plots, bars = parts(figures["attention_heads.png"])
    assert len(plots) == 4 and len(bars) == 1 and "attention weight" in bars[0].get_ylabel()
    assert plots[0].get_ylabel() == "query position"
    assert {ax.get_xlabel() for ax in plots} == {"key position"}
    assert plots[0].get_yticklabels()[1].get_text() == "1: charge"  # positions numbered, tokens beside them


def _write_pid(path):
    """A drawing that writes the pid of the process that drew it."""
    path.write_text(str(os.getpid()))
    return path


def _fail_in_child(parent, path):
    if os.getpid() != parent:
        raise RuntimeError("this child cannot draw")
    return _write_pid(path=path)


def test_a_chart_drawn_aside_is_drawn_by_a_child_while_this_process_goes_on(tmp_path):
    finish = draw_aside(Drawing(_write_pid, tmp_path / "chart.png"))
    assert finish() == tmp_path / "chart.png"
    assert int((tmp_path / "chart.png").read_text()) != os.getpid()


def test_a_chart_whose_child_failed_is_drawn_here_instead(tmp_path):
    finish = draw_aside(Drawing(_fail_in_child, tmp_path / "chart.png", os.getpid()))
    assert finish() == tmp_path / "chart.png"
    assert int((tmp_path / "chart.png").read_text()) == os.getpid()


_DRAWER_RUN = r"""
import json, sys
from pathlib import Path
from autograder.reports import figures
from autograder.reports.drawer import Drawer
folder = Path(sys.argv[1])
drawer = Drawer.start()
drawer.draw(figures.Drawing(figures.score_histogram, folder / "histogram.png", [1.0, 2.0, 2.0], 3.0))
drawer.draw(figures.Drawing(figures.pass_rate_chart, folder / "rates.png", [("a check", "heads", 0.5)]))
paths = drawer.finish()
print(json.dumps({"paths": [str(path) for path in paths], "matplotlib here": "matplotlib" in sys.modules}))
"""


def test_a_runs_charts_are_drawn_by_its_drawer_and_its_own_process_never_imports_matplotlib(tmp_path):
    """The grading process forks a drawer before it imports torch; the drawer imports matplotlib beside the
    start-up and draws what it is sent: the process that sent it never imports matplotlib."""
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _DRAWER_RUN, str(tmp_path)], capture_output=True, text=True,
                          timeout=300, cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr[-800:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"paths": [str(tmp_path / "histogram.png"), str(tmp_path / "rates.png")], "matplotlib here": False}
    for name in ("histogram.png", "rates.png"):
        assert (tmp_path / name).read_bytes().startswith(b"\x89PNG")


def test_a_chart_the_drawer_does_not_draw_is_drawn_by_the_run_itself(tmp_path):
    """A drawer that refuses a drawing (only the report's charts are drawn there), or is gone, costs nothing:
    the run draws the charts itself."""
    from autograder.reports.drawer import Drawer

    drawer = Drawer.start()
    drawer.draw(Drawing(_write_pid, tmp_path / "refused.png"))  # not one of the drawer's charts
    assert drawer.finish() == [tmp_path / "refused.png"]
    assert int((tmp_path / "refused.png").read_text()) == os.getpid()

    gone = Drawer.start()
    gone.close()  # ended before anything was drawn
    gone.draw(Drawing(_write_pid, tmp_path / "late.png"))
    assert gone.finish() == [tmp_path / "late.png"]
    assert int((tmp_path / "late.png").read_text()) == os.getpid()


RATES = [(f"test_{index} checks something with a name long enough to wrap " + "x" * (index % 50), f"a_part_of_the_lesson_{index % 12}",
          index / 14) for index in range(14)] + [("zero passed", "a_part_of_the_lesson_0", 0.0), ("all passed", "a_part_of_the_lesson_1", 1.0),
    ("a name of many words " * 6 + "y" * 90, "a_part_of_the_lesson_2", 0.5)]  # wrapped, one word cut in two


def test_the_pass_rate_chart_shows_every_name_in_full_hardest_first_inside_the_picture():
    from autograder.reports.rate_chart import BAR_WIDTH, fonts, layout

    text, title = fonts()
    chart = layout(RATES, "a note", text, title)
    width, height = chart.size
    expected = sorted(RATES, key=lambda item: (item[2], item[0]))
    assert [(row.group, row.rate) for row in chart.rows] == [(group, rate) for _, group, rate in expected]
    for row, (name, _, _) in zip(chart.rows, expected):
        assert "".join(row.lines).replace(" ", "") == name.replace(" ", "")  # in full, only wrapped
        assert len(row.lines) >= 2 or text.getlength(name) <= chart.left
        for line in row.lines:  # right-aligned left of the bars, never cut at the picture's left edge
            assert text.getlength(line) <= chart.left - 10 and line
        assert row.height >= len(row.lines) * sum(text.getmetrics())
    tops = [row.top for row in chart.rows]
    assert all(low.top + low.height <= high.top for low, high in zip(chart.rows, chart.rows[1:]))  # no overlap
    assert chart.plot[0] <= tops[0] and chart.rows[-1].top + chart.rows[-1].height <= chart.plot[1] < height
    assert chart.left + BAR_WIDTH + 5 + text.getlength("100%") <= width
    assert max(len(row.lines) for row in chart.rows) >= 3
    assert chart.title == ["Pass rate per test, hardest first", "(a note)"]


def test_the_pass_rate_charts_legend_names_each_part_once_in_its_bars_colour_inside_the_picture():
    from autograder.reports.rate_chart import fonts, layout

    text, title = fonts()
    chart = layout(RATES, "", text, title)
    groups = list(dict.fromkeys(group for _, group, _ in RATES))
    assert [entry[2] for entry in chart.legend] == [group.replace("_", " ") for group in groups]
    assert len({entry[3] for entry in chart.legend}) == min(len(groups), 10)
    colours = {entry[2]: entry[3] for entry in chart.legend}
    assert all(row.colour == colours[row.group.replace("_", " ")] for row in chart.rows)
    assert len({entry[1] for entry in chart.legend}) >= 2  # twelve parts do not fit one line: wrapped
    for x, y, group, _ in chart.legend:
        assert x + sum(text.getmetrics()) + 4 + text.getlength(group) <= chart.size[0]
        assert y + sum(text.getmetrics()) <= chart.plot[0]
    assert chart.title == ["Pass rate per test, hardest first"]


def test_the_pass_rate_chart_draws_each_bar_in_its_parts_colour(tmp_path):
    from PIL import Image, ImageColor

    from autograder.reports.rate_chart import BAR_WIDTH, fonts, layout, pass_rate_chart

    path = pass_rate_chart(RATES, tmp_path / "rates.png", note="a note")
    chart = layout(RATES, "a note", *fonts())
    image = Image.open(path).convert("RGB")
    assert image.size == chart.size
    for row in chart.rows:
        middle = row.top + row.height // 2
        inside = image.getpixel((chart.left + max(int(row.rate * BAR_WIDTH) // 2, 1), middle))
        assert (inside == ImageColor.getrgb(row.colour)) == (row.rate > 0.01), (row.rate, inside)
    assert image.getpixel((chart.left + BAR_WIDTH + 3, chart.rows[0].top + 1)) == (255, 255, 255)
    empty = Image.open(pass_rate_chart([], tmp_path / "none.png"))  # a class with no counted check: an axis only
    assert empty.size == layout([], "", *fonts()).size



def test_a_chart_is_written_as_a_png_of_exactly_its_pixels_and_never_half_written(tmp_path, monkeypatch):
    """The charts' own PNG writer (unfiltered rows: Pillow's filter search was most of a run's wait for its charts)
    gives a file that Pillow reads back as the very pixels drawn, with PNG's checksums right; a picture that is
    not RGB is refused in words; and a write that fails leaves no file where the chart belongs."""
    import io

    import pytest
    from PIL import Image, ImageDraw

    from autograder.reports import png

    image = Image.new("RGB", (37, 23), "white")
    ImageDraw.Draw(image).text((2, 2), "0.5", fill=(200, 30, 90))
    image.putpixel((36, 22), (1, 2, 3))
    data = png.save_png(image, tmp_path / "chart.png").read_bytes()
    back = Image.open(io.BytesIO(data))
    back.load()  # checks each chunk's CRC and the zlib stream
    assert (back.mode, back.size, back.tobytes()) == ("RGB", image.size, image.tobytes())
    assert data.startswith(png.SIGNATURE) and data.endswith(png._chunk(b"IEND", b""))
    assert sorted(path.name for path in tmp_path.iterdir()) == ["chart.png"]
    with pytest.raises(ValueError, match="RGB"):
        png.png_bytes(image.convert("L"))

    def refused(source, target):
        raise OSError("the disk is full")

    monkeypatch.setattr(os, "replace", refused)
    with pytest.raises(OSError):
        png.save_png(image, tmp_path / "other.png")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["chart.png"]

def test_the_pass_rate_chart_needs_no_matplotlib(tmp_path):
    """Drawn at the end of every run, it costs tens of milliseconds: Pillow and the font, not matplotlib."""
    import json
    import subprocess
    import sys

    code = ("import sys; from autograder.reports.rate_chart import pass_rate_chart; "
            f"pass_rate_chart([('a check', 'heads', 0.5)], {str(tmp_path / 'rates.png')!r}); "
            "print('matplotlib' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr[-800:]
    assert json.loads(done.stdout.strip().lower()) is False
    assert (tmp_path / "rates.png").read_bytes().startswith(b"\x89PNG")


def test_the_pass_rate_chart_keeps_an_odd_rate_a_long_part_and_a_note_of_lines_inside_the_picture(tmp_path):
    from PIL import Image

    from autograder.reports.rate_chart import fonts, layout, pass_rate_chart

    rates = [("a check", "a part named at great length " * 12, float("nan")), ("another", "short", 0.5)]
    text, title = fonts()
    chart = layout(rates, "two\nlines", text, title)
    assert chart.title[1] == "(two lines)" and [row.rate for row in chart.rows] == [0.0, 0.5]
    for x, _, group, _ in chart.legend:
        assert x + sum(text.getmetrics()) + 4 + text.getlength(group) <= chart.size[0]
    assert Image.open(pass_rate_chart(rates, tmp_path / "odd.png", note="two\nlines")).size == chart.size


def test_the_score_histogram_counts_each_score_in_its_bin_under_round_labels(tmp_path):
    """The class report's histogram (Pillow's): equal bins from 0 to the maximum, the last one closed, a score
    outside the range not counted; axis labels at round steps; a picture of the size it always had."""
    from PIL import Image

    from autograder.reports import score_chart

    counts, edges = score_chart.bins([0.0, 1.0, 2.5, 3.0, 3.5, -1.0], 3.0)
    assert counts == [1, 0, 1, 0, 0, 2] and edges[0] == 0.0 and edges[-1] == 3.0 and len(edges) == 7
    assert score_chart.bins([], 0.0)[1][-1] == 1.0  # no maximum: an axis of 1, never of 0
    assert score_chart.ticks(19, 5, whole=True) == [0.0, 5.0, 10.0, 15.0, 20.0]  # whole students, above the tallest
    assert score_chart.ticks(1, 5, whole=True) == [0.0, 1.0]
    assert score_chart.ticks(121) == [20.0 * index for index in range(8)]
    assert score_chart.ticks(3) == [0.5 * index for index in range(7)]
    path = score_chart.score_histogram([0.0, 1.0, 2.5, 3.0], 3.0, tmp_path / "histogram.png")
    with Image.open(path) as image:
        assert image.format == "PNG" and image.size == score_chart.SIZE
