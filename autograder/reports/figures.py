"""Pictures (PNG files): the heatmaps a lesson's hooks draw, with matplotlib's file-only backend, and the class
report's two charts, drawn with Pillow (:mod:`.rate_chart`, :mod:`.score_chart`: matplotlib's text layout cost the
run's end most of a second). matplotlib is imported by the first heatmap, not with this module: a grading run draws
in a process of its own (:mod:`.drawer`), and its own process never needs it."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..lesson.assignment import Assignment
from .rate_chart import pass_rate_chart
from .score_chart import score_histogram

# The report's charts are named here for the drawer (drawer.DRAWINGS), beside the lesson's heatmaps.
__all__ = ["Drawing", "draw_aside", "warm", "heatmap", "attention_maps", "lesson_figures", "pass_rate_chart",
           "score_histogram"]

if TYPE_CHECKING:
    import numpy as np
    from matplotlib.figure import Figure


def draw_aside(drawing: Drawing) -> Callable[[], Path]:
    """Start ``drawing`` in a forked child, so the caller's other work runs beside matplotlib's text rendering (most
    of a second for a chart of a whole rubric); return ``finish()``, which waits for the child and returns the
    figure's path. Where no child can be forked, or it fails, ``finish()`` draws in this process: the figure is
    there either way."""
    try:
        pid = os.fork()
    except OSError:
        return drawing
    if pid == 0:  # the child: draw, and leave without running any of the parent's exit handlers
        code = 1
        try:
            drawing()
            code = 0
        finally:
            os._exit(code)

    def finish() -> Path:
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0 or not drawing.path.is_file():
            return drawing()
        return drawing.path

    return finish


class Drawing:
    """A figure to draw: ``function(*args, path=path, **kwargs)``, whose ``path`` is known before it is drawn."""

    def __init__(self, function: Callable[..., Path], path: str | Path, *args, **kwargs) -> None:
        self.function, self.path, self.args, self.kwargs = function, Path(path), args, kwargs

    def __call__(self) -> Path:
        return self.function(*self.args, path=self.path, **self.kwargs)


def _figure(**options) -> Figure:
    """A figure of its own, drawn to files only: no pyplot (its start-up and its global list of open figures),
    so a figure is freed once it is saved."""
    from matplotlib.figure import Figure

    return Figure(**options)


def warm() -> None:
    """Import what the report's charts need and read their fonts, so the first chart that counts starts warm."""
    importlib.import_module("numpy")  # for its start-up cost (the histogram's bins)
    importlib.import_module("PIL.ImageDraw")  # likewise

    from .rate_chart import fonts

    fonts()  # the charts' fonts, read once


def heatmap(table: np.ndarray, path: str | Path, title: str, xlabel: str, ylabel: str, value: str = "value"
            ) -> Path:
    """Save a 2-D table with values in [-1, 1] as a red/blue heatmap with a colour bar named ``value``; return the
    path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = _figure(figsize=(8, 4.5), dpi=110)
    ax = fig.subplots()
    image = ax.imshow(table, cmap="RdBu", aspect="auto", vmin=-1, vmax=1, interpolation="nearest")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    fig.colorbar(image, ax=ax, fraction=0.04, label=value)
    fig.tight_layout()
    fig.savefig(path)
    return path


def attention_maps(weights: np.ndarray, tokens: list[str], path: str | Path, title: str = "Attention of each head"
                   ) -> Path:
    """One heatmap per head of a ``(heads, seq, seq)`` weight tensor, rows = queries, columns = keys, each axis
    named and numbered by position (with its token), one colour bar for every head (all share the scale 0 to 1)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    heads = weights.shape[0]
    labels = [f"{index}: {token}" for index, token in enumerate(tokens)]
    fig = _figure(figsize=(3.2 * heads + 1.2, 3.9), dpi=110, layout="constrained")
    axes = fig.subplots(1, heads, squeeze=False)
    for head, ax in enumerate(axes[0]):
        image = ax.imshow(weights[head], cmap="viridis", vmin=0, vmax=1)
        ax.set_title(f"head {head}")
        ax.set_xticks(range(len(tokens)), labels, rotation=60, fontsize=7)
        ax.set_yticks(range(len(tokens)), labels if head == 0 else [""] * len(tokens), fontsize=7)
        ax.set_xlabel("key position")
        if head == 0:
            ax.set_ylabel("query position")
    fig.colorbar(image, ax=axes[0].tolist(), fraction=0.03, label="attention weight (each row sums to 1)")
    fig.suptitle(title)
    fig.savefig(path)
    return path


def lesson_figures(assignment: Assignment, folder: str | Path) -> list[Path]:
    """The lesson's own figures (its hooks' ``figures``, drawn with the reference); [] when it has none."""
    from ..lesson.reference import load_reference

    hooks = assignment.load_hooks()
    if hooks is None or not hasattr(hooks, "figures"):
        return []
    return hooks.figures(load_reference(assignment), Path(folder))
