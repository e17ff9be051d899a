"""Pictures of the lesson's objects (PNG files), drawn with matplotlib's file-only backend."""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display on grading machines
import matplotlib.pyplot as plt  # noqa: E402


def encoding_heatmap(table, path, title="Positional encoding: one row per position"):
    """Save a ``(positions, d_model)`` table as a red/blue heatmap; return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    image = ax.imshow(table, cmap="RdBu", aspect="auto", vmin=-1, vmax=1, interpolation="nearest")
    ax.set_xlabel("embedding dimension (even: sin, odd: cos)")
    ax.set_ylabel("position")
    ax.set_title(title)
    fig.colorbar(image, ax=ax, fraction=0.04)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
