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


def test_a_tight_chart_is_drawn_once_and_is_the_picture_savefig_would_draw(monkeypatch, tmp_path):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from autograder.reports.figures import pass_rate_chart

    rates = [(f"test_{index}_with_a_long_name_" + "x" * (index % 50), f"part_{index % 3}", index / 12)
             for index in range(12)]
    pictures = drawn(monkeypatch, lambda: [pass_rate_chart(rates, tmp_path / "once.png", note="a note")])
    figure = pictures["once.png"]
    draws = []
    monkeypatch.setattr(FigureCanvasAgg, "draw", lambda canvas, *a, _draw=FigureCanvasAgg.draw:
                        draws.append(1) or _draw(canvas, *a))
    figure.savefig(tmp_path / "twice.png", bbox_inches="tight")  # matplotlib's own tight box: two draws
    twice = len(draws)
    pass_rate_chart(rates, tmp_path / "once.png", note="a note")
    assert (tmp_path / "once.png").read_bytes() == (tmp_path / "twice.png").read_bytes()
    assert twice == 2 and len(draws) - twice == 1
