"""Static scan of a submission's source for library calls that skip the assignment's work
(``worker.contract.FORBIDDEN``, the one list; docs and docstrings restate it, tests/test_restatements.py checks).

Reads the text only (``ast``); nothing is imported or run. Only uses count:
attribute accesses on torch, names imported from torch, and names looked up
as strings (``getattr``); a plain string that equals a forbidden name (an
``__all__`` entry, a message) is not a use. The worker's run-time tripwires
catch the indirect cases this misses (helpers, computed names).
"""

import ast

from .source_tree import ParsedFile, parse
from ..worker.contract import Contract


def _torch_aliases(nodes, forbidden):
    """Names bound to torch or its submodules, and forbidden names imported directly from torch."""
    aliases, direct = set(), {}
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "torch" or alias.name.startswith("torch."):
                    aliases.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch":
            for alias in node.names:
                if alias.name in forbidden:
                    direct[alias.asname or alias.name] = forbidden[alias.name]
                else:
                    aliases.add(alias.asname or alias.name)
    return aliases, direct


def _root_name(node):
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


# Ways to reach an attribute by its name as a string: getattr(F, "..."), attrgetter("..."), F.__dict__["..."].
LOOKUPS = {"getattr", "attrgetter", "methodcaller", "__getattribute__", "__getattr__", "get", "__getitem__",
           "_jit_get_operation", "_get_operation_overload"}  # the last two: an operator by its name, "aten::..."


def _named_by(text):
    """The names a lookup string names: its dotted parts, an operator's namespace and overload split off
    (``"aten::_scaled_dot_product_attention_math"``, ``"aten._native_multi_head_attention.default"``)."""
    return text.replace("::", ".").split(".")


def _looked_up_name(sub):
    """The string constants ``sub`` uses to look an attribute up by name (never a plain string such as an
    ``__all__`` entry or a message, which may well equal one of the assignment's own public names)."""
    if isinstance(sub, ast.Call):
        func = sub.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if called in LOOKUPS:
            return [arg.value for arg in sub.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]
    elif isinstance(sub, ast.Subscript) and isinstance(sub.slice, ast.Constant) and isinstance(sub.slice.value, str):
        return [sub.slice.value]  # vars(F)["..."], F.__dict__["..."]
    return ()


def _hits(nodes, aliases, direct, forbidden):
    """The forbidden APIs used by ``nodes`` (a statement and every node under it)."""
    found = set()
    for sub in nodes:
        if isinstance(sub, ast.Attribute) and sub.attr in forbidden and _root_name(sub) in aliases:
            found.add(forbidden[sub.attr])
        elif isinstance(sub, ast.Name) and sub.id in direct:
            found.add(direct[sub.id])
        elif isinstance(sub, ast.ImportFrom) and (sub.module or "").startswith("torch"):
            found.update(forbidden[a.name] for a in sub.names if a.name in forbidden)
        else:
            found.update(forbidden[name] for text in _looked_up_name(sub) for name in _named_by(text)
                         if name in forbidden)
    return found


def scan_module(source: str | ParsedFile | None, module: str, contract: Contract) -> dict[str, set[str]]:
    """``{contract name: set of forbidden APIs}`` for one student file (its text, or its tree already parsed);
    module-level use taints every name."""
    parsed = source if isinstance(source, ParsedFile) or source is None else parse(source)
    if parsed is None:
        return {}  # the import will fail and say so (a parser's recursion limit is the submission's doing too)
    forbidden = contract.forbidden_by_name
    aliases, direct = _torch_aliases(parsed.nodes(), forbidden)
    names = [name for name, owner in contract.names.items() if owner == module]
    result = {}
    module_level = set()
    for node, under in parsed.parts:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name in names:
                found = _hits(under, aliases, direct, forbidden)
                if found:
                    result[node.name] = found
        elif not isinstance(node, (ast.Import, ast.ImportFrom)):
            module_level |= _hits(under, aliases, direct, forbidden)
    if module_level:
        for name in names:
            result.setdefault(name, set()).update(module_level)
    return result


def scan_submission(files: dict[str, bytes], contract: Contract,
                    parsed: dict[str, ParsedFile | None] | None = None) -> dict[str, set[str]]:
    """``files`` maps module name to its bytes; returns the merged ``{name: set of APIs}``. ``parsed``: the files'
    trees, when the caller has them (:func:`.source_tree.parse_files`)."""
    result = {}
    for module, data in files.items():
        tree = parsed[module] if parsed is not None and module in parsed else parse(data)
        result.update(scan_module(tree, module, contract))
    return result
