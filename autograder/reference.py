"""Load the reference solutions in-process, under a name that cannot collide with a student's ``mha_pe``.

Only trusted code is loaded this way (the instructor's ``solutions/``);
student code never enters the judge's process.
"""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from . import paths
from .errors import KitError


def load_package(package_dir, module_name):
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


def load_public_checks() -> ModuleType:
    """The helpers the public tests share (``solutions/mha_pe/tests/checks.py``, the instructor's copy, never a
    student's), imported as ``mha_pe_public_checks``: the hidden tests, the bench and the kit's tests build
    ``torch.nn.MultiheadAttention`` twins with the same code the students' tests use."""
    return load_module(paths.SOLUTIONS_DIR / paths.ASSIGNMENT_ID / "tests" / "checks.py", "mha_pe_public_checks")


def load_reference():
    """The reference ``mha_pe`` package from ``solutions/``, imported as ``mha_pe_reference``."""
    return load_package(paths.SOLUTIONS_DIR / paths.ASSIGNMENT_ID, "mha_pe_reference")
