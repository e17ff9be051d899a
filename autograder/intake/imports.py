"""Static scan of a submission's imports: the modules it imports that the grader does not have.

A student file may import the standard library (``sys.stdlib_module_names``), its own package (relative
imports, the package's name, its sibling files) and the assignment's ``packages``; the worker refuses anything
else (``worker.session.install_import_guard``). This scan, in the judge, reads the text only (``ast``: nothing
imported or run, nothing the worker says) so the feedback can say once, in the judge's words, which import
failed and what is allowed. An import inside ``try`` with a handler for ``ImportError`` has a fallback: not
reported.
"""

import ast
import sys

from .source_tree import ParsedFile, nodes_under, parse
from ..worker.contract import Contract

MAX_NAMES = 5  # per file: a name is the submission's text, so the note stays short
NAME_LIMIT = 60
GUARDS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


def _guarded(nodes: list[ast.AST]) -> set[int]:
    """Ids of the import statements inside a ``try`` whose handlers catch an import's failure."""
    guarded = set()
    for node in nodes:
        if not isinstance(node, ast.Try):
            continue
        caught = set()
        for handler in node.handlers:
            kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
            caught |= {"BaseException" if kind is None else getattr(kind, "id", getattr(kind, "attr", ""))
                       for kind in kinds}
        if caught & GUARDS:
            guarded |= {id(sub) for statement in node.body for sub in nodes_under(statement)}
    return guarded


def _top_names(parsed: ParsedFile) -> list[str]:
    """The top-level module names of the absolute imports in a file, unguarded, in order of appearance."""
    nodes = parsed.nodes()
    guarded = _guarded(nodes)
    statements = sorted((node for node in nodes if isinstance(node, (ast.Import, ast.ImportFrom))
                         and id(node) not in guarded), key=lambda node: (node.lineno, node.col_offset))
    names = []
    for node in statements:
        if isinstance(node, ast.Import):
            names += [alias.name.partition(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module.partition(".")[0])
    return names


def unavailable_imports(files: dict[str, bytes], contract: Contract,
                        parsed: dict[str, ParsedFile | None] | None = None) -> dict[str, tuple[str, ...]]:
    """``{student module: top-level names it imports that the grader does not have}``, only modules with some.
    ``parsed``: the files' trees, when the caller has them (:func:`.source_tree.parse_files`)."""
    allowed = set(sys.stdlib_module_names) | set(contract.packages) | {contract.package, *contract.modules}
    found = {}
    for module, data in files.items():
        tree = parsed[module] if parsed is not None and module in parsed else parse(data)
        if tree is None:
            continue  # the import fails and says so
        names = [name for name in dict.fromkeys(_top_names(tree)) if name not in allowed]
        if names:
            found[module] = tuple(name[:NAME_LIMIT] for name in names[:MAX_NAMES])
    return found


def allowed_text(contract: Contract) -> str:
    """The packages a student may import, for feedback: ``"torch, numpy, einops"``."""
    return ", ".join(contract.packages)


def note(found: dict[str, tuple[str, ...]], contract: Contract) -> str:
    """The one note, for the student, on what ``unavailable_imports`` found (empty when nothing)."""
    if not found:
        return ""
    parts = "; ".join(f"{module}.py imports {', '.join(f'`{name}`' for name in names)}"
                      for module, names in found.items())
    return (f"Your code imports packages the grader does not have ({parts}), so every check that needs those "
            f"files failed. Besides Python's standard library and your own package you may import "
            f"{allowed_text(contract)}.")
