"""The kit built as a wheel from a copy of its sources (so the build leaves nothing in the repository), offline."""

import shutil
import subprocess
import sys
from pathlib import Path

from autograder import paths


def build_wheel(folder: Path) -> tuple[Path, Path]:
    """``(wheel, source)``: the kit's wheel built into ``folder/dist`` from its copy in ``folder/source``."""
    source = folder / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copyfile(paths.REPO_ROOT / name, source / name)
    shutil.copytree(paths.REPO_ROOT / "autograder", source / "autograder",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                           "-q", "-w", str(folder / "dist"), str(source)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (wheel,) = (folder / "dist").glob("*.whl")
    return wheel, source
