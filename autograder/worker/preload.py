"""What the notebook stage needs, loaded into a worker before it starts (``GRADER_NOTEBOOKS``), by a zygote before
its first fork or by a worker started alone before its hello: where the run grades notebooks, every worker of it
starts with it loaded, the code's as well as the notebook's, and where it does not, none does."""

import importlib
import os

PRELOAD_ENV = "GRADER_NOTEBOOKS"  # "1": the run grades notebooks, so every worker starts with preload_notebook's
_preloaded = []  # its answer, once it has run in this process


def preload_notebook():
    """Import what running a notebook needs: IPython's input transformations and shell, and matplotlib with its
    non-interactive backend (its font cache built once). Run where the run grades notebooks (decided by its
    configuration: :data:`PRELOAD_ENV`), before any worker starts, so every worker of the run, the code's and the
    notebook's, starts in the same state whoever handed in a notebook (a submission that looks at ``sys.modules``
    sees the same whatever its classmates did); once per process."""
    if _preloaded:
        return _preloaded[0]
    _preloaded.append(_preload())
    return _preloaded[0]


def _preload():
    os.environ["MPLBACKEND"] = "Agg"
    try:
        importlib.import_module("IPython.core.inputtransformer2")
        importlib.import_module("IPython.core.interactiveshell")
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as pyplot

        # A throwaway figure of the kinds notebooks draw (an image with a colour bar, a line): the modules and
        # tables each first loads on its first use are then loaded once, here, not in every worker.
        figure, axes = pyplot.subplots()
        figure.colorbar(axes.imshow([[0.0, 1.0]]), ax=axes)
        axes.plot([0, 1])
        axes.set_title("warm-up")
        pyplot.close(figure)
    except Exception:  # noqa: BLE001 - a notebook that needs them will say so in its own outputs
        return False
    return True


def preloaded():
    """Whether :func:`preload_notebook` has run in this process."""
    return bool(_preloaded)
