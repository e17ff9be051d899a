"""Load the reference solutions in-process, under a name that cannot collide with a student's package.

Only trusted code is loaded this way (the instructor's ``solutions/``);
student code never enters the judge's process.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from .assignment import Assignment
from ..errors import KitError


def load_package(package_dir: str | Path, module_name: str) -> ModuleType:
    """Import the package in ``package_dir`` as ``module_name`` (relative imports inside it work)."""
    package_dir = Path(package_dir)
    init = package_dir / "__init__.py"
    if not init.is_file():
        raise KitError(f"not a Python package (no __init__.py): {package_dir}")
    return _load(module_name, init, [str(package_dir)])


def load_module(path: Path, module_name: str) -> ModuleType:
    """Import the single file ``path`` as ``module_name``."""
    return _load(module_name, path, None)


def _load(module_name, path, search_locations):
    """Import ``path`` as ``module_name`` once per process; a failed import leaves no half-made module behind."""
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path, submodule_search_locations=search_locations)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[module_name]
        raise
    return module


def load_reference(assignment: Assignment) -> ModuleType:
    """The assignment's reference package (its ``solutions`` folder), imported as ``<id>_reference``."""
    return load_package(assignment.solutions, f"{assignment.id}_reference")
