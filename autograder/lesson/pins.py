"""The pinned versions, read from ``pyproject.toml``: the one place a pin is written.

What the kit writes for others (the Classroom template's requirements, README and workflow, the Gradescope
zip's ``setup.sh``) takes its pins from here when it is written, so it never runs ahead of or behind the kit.
"""

import re
import tomllib
from functools import cache

from .. import paths
from ..errors import KitError

PYPROJECT = paths.REPO_ROOT / "pyproject.toml"


@cache
def _requirements() -> dict:
    """``{name: requirement}`` of every dependency, the optional ones included."""
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    listed = project.get("dependencies", []) + sum(project.get("optional-dependencies", {}).values(), [])
    return {re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower(): requirement for requirement in listed}


def pin(name: str) -> str:
    """The requirement pyproject.toml gives ``name`` (``"torch==2.13.0"``); it must pin an exact version."""
    requirement = _requirements().get(name.lower())
    if requirement is None or "==" not in requirement:
        raise KitError(f"pyproject.toml pins no exact version of {name} (a lesson's packages are pinned there)")
    return requirement


def version(name: str) -> str:
    """The version pinned for ``name`` (``"2.13.0"``)."""
    return pin(name).split("==", 1)[1].strip()


TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def torch_cpu_install(python: str) -> str:
    """The command that installs the pinned torch's CPU build with ``python`` (installed first, pip then keeps it)."""
    return f"{python} -m pip install {pin('torch')} --index-url {TORCH_CPU_INDEX}"
