"""The shape of a student package, as data: which files, which public names, which library calls are off limits.

The judge reads it from the assignment's descriptor (:mod:`autograder.lesson.assignment`) and hands it to each
worker as JSON (the ``GRADER_CONTRACT`` variable), so no lesson is written into the worker's code.
"""

import importlib
import json
import sys
from dataclasses import dataclass

ENV = "GRADER_CONTRACT"


@dataclass(frozen=True)
class Contract:
    """``package``: the name students' code imports itself under; ``modules``: the student files (stems), in the
    order students write them; ``names``: each public name -> the module that defines it; ``classes``: the names
    whose instances stay in the worker behind handles; ``forbidden``: dotted paths of library calls that would
    skip the work the assignment asks for (``torch.linalg.vector_norm``); ``packages``: the top-level names a
    student file may import besides the standard library and its own package."""

    package: str
    modules: tuple[str, ...]
    names: dict[str, str]
    classes: frozenset[str]
    forbidden: tuple[str, ...]
    packages: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        stray = sorted(module for module in self.names.values() if module not in self.modules)
        if stray:
            raise ValueError(f"public names point at files that are not the assignment's: {', '.join(stray)}")
        if not self.classes <= set(self.names):
            raise ValueError("every class must be one of the public names")

    @property
    def forbidden_by_name(self) -> dict[str, str]:
        """``{attribute name: dotted path}``: how a use looks in source (``F.normalize``)."""
        return {path.rsplit(".", 1)[-1]: path for path in self.forbidden}

    def to_json(self) -> dict:
        return {"package": self.package, "modules": list(self.modules), "names": dict(self.names),
                "classes": sorted(self.classes), "forbidden": list(self.forbidden),
                "packages": list(self.packages)}

    @classmethod
    def from_json(cls, data: dict) -> "Contract":
        return cls(str(data["package"]), tuple(map(str, data["modules"])),
                   {str(name): str(module) for name, module in dict(data["names"]).items()},
                   frozenset(map(str, data.get("classes", ()))), tuple(map(str, data.get("forbidden", ()))),
                   tuple(map(str, data.get("packages", ()))))

    def to_env(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True)

    @classmethod
    def from_env(cls, environ: dict) -> "Contract":
        return cls.from_json(json.loads(environ[ENV]))


def resolve_path(path: str) -> tuple[object, object]:
    """``(owner, object)`` that the dotted ``path`` names (``(None, None)`` when it names nothing in the libraries
    installed here). The longest prefix that is a module is imported, so a submodule its package does not import
    itself (``torch.nn.attention.flex_attention``) is reached too: the path is the instructor's, never a student's."""
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            owner = importlib.import_module(".".join(parts[:cut]))
        except Exception:  # noqa: BLE001 - not a module (or one that cannot load here): a shorter prefix, or nothing
            continue
        try:
            for part in parts[cut:-1]:
                owner = getattr(owner, part)
            return owner, getattr(owner, parts[-1])
        except AttributeError:
            return None, None
    return None, None


_COPIES: dict = {}  # forbidden path -> [(module, attribute)]: read once in the zygote, inherited by its workers


def copies(path: str) -> list[tuple[object, str]]:
    """Other places the library keeps the object ``path`` names: attributes of its C extension's modules
    (``torch._C._nn`` holds ``torch.nn.functional``'s attention), which a submission could call, by name or
    through a variable, past a tripwire on ``path`` alone. A module's attribute only (a class's, such as
    ``torch._C._VariableFunctions``', cannot be replaced)."""
    if path not in _COPIES:
        owner, target = resolve_path(path)
        prefix = path.split(".", 1)[0] + "._C"
        found = []
        if target is not None and not isinstance(target, type):
            for name, module in list(sys.modules.items()):
                if module is not None and module is not owner and (name == prefix or name.startswith(prefix + ".")):
                    found += [(module, attribute) for attribute, value in list(vars(module).items()) if value is target]
        _COPIES[path] = found
    return _COPIES[path]
