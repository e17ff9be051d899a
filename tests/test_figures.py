"""The guides' figures are read without their code: every heatmap has a colour bar with its quantity, and axes
named for what they index (position and feature; query and key positions)."""

import os

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
