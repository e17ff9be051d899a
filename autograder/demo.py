"""``make demo``: show the kit's main job on the bundled material.

Runs the released public tests against the reference solutions and against
the student stubs, and draws the positional-encoding heatmap.
"""

from pathlib import Path

from . import paths
from .figures import encoding_heatmap
from .public_tests import run_public_tests
from .reference import load_reference


def run_demo(out_dir, emit=print):
    """Write the demo's outputs under ``out_dir``; return the process exit status."""
    out_dir = Path(out_dir)
    status = 0
    for label, parent in (("reference solutions", paths.SOLUTIONS_DIR), ("student stubs", paths.ASSIGNMENTS_DIR)):
        run = run_public_tests(parent)
        total = len(run.outcomes)
        emit(f"public tests on the {label}: {run.count('passed')}/{total} passed")
        if label.startswith("reference") and (total == 0 or run.count("passed") != total):
            status = 1
    reference = load_reference()
    figure = encoding_heatmap(
        reference.get_positional_encoding(50, 128).numpy(),
        out_dir / "figures" / "positional_encoding.png",
        title="Positional encoding of 50 positions, d_model = 128",
    )
    emit(f"heatmap written to {figure}")
    return status
