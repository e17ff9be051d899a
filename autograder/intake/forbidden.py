"""Static scan of a submission's source for library calls that skip the assignment's work
(``worker.contract.FORBIDDEN``, the one list; docs and docstrings restate it, tests/test_restatements.py checks).

Reads the text only (``ast``); nothing is imported or run. Only uses count:
attribute accesses on torch, names imported from torch, and names looked up
as strings (``getattr``, an operator's ``"aten::..."``) in whatever object, save
a contract name the module defines read back from its own ``globals()``
(:func:`_own_names`); a plain string that equals a forbidden name (an ``__all__``
entry, a message) is not a use. A helper's uses are charged to the contract names
that name it (:func:`scan_module`). The worker's run-time tripwires catch the
indirect cases this misses (computed names).
"""

import ast

from . import source_tree
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


def _called(func):
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


def _own_namespace(node):
    """Whether ``node`` reads the module's own namespace: ``globals()``."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "globals" \
        and not node.args and not node.keywords


def _looked_up_name(sub, own=frozenset()):
    """The string constants ``sub`` uses to look an attribute up by name (never a plain string such as an
    ``__all__`` entry or a message, which may well equal one of the assignment's own public names), save a name
    in ``own`` (:func:`_own_names`) looked up in the module's own namespace."""
    if isinstance(sub, ast.Call):
        if _called(sub.func) not in LOOKUPS:
            return ()
        names = [arg.value for arg in sub.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]
        # The namespace searched: getattr's first argument, or the object whose .get or __getitem__ is called.
        searched = sub.args[0] if _called(sub.func) == "getattr" and sub.args else getattr(sub.func, "value", None)
    elif isinstance(sub, ast.Subscript) and isinstance(sub.slice, ast.Constant) and isinstance(sub.slice.value, str):
        names, searched = [sub.slice.value], sub.value  # vars(F)["..."], F.__dict__["..."]
    else:
        return ()
    if own and searched is not None and _own_namespace(searched):
        return [name for name in names if name not in own]
    return names


BUILTINS = {"globals", "builtins", "__builtins__"}
BINDERS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.alias, ast.arg, ast.ExceptHandler, ast.MatchAs,
           ast.MatchStar, ast.MatchMapping)  # the nodes that bind a name in one of _may_set's fields


def _may_set(nodes, bound, named=frozenset(), attributes=frozenset()):
    """Whether the file may give a name of ``bound`` a value of its own: it binds one (an assignment, a definition,
    a parameter, an import, an except or match name, ``global``, an attribute set) or writes it as text
    (``globals()["__name__"]``). ``named``: names that count wherever they appear, read too; ``attributes``: names
    that count as any attribute (``print.__self__.globals``)."""
    every = bound | named
    for node in nodes:
        if isinstance(node, ast.Name):
            hit = node.id in named or (node.id in bound and not isinstance(node.ctx, ast.Load))
        elif isinstance(node, ast.Attribute):
            read = isinstance(node.ctx, ast.Load)
            hit = node.attr in (named if read else every) | attributes
        elif isinstance(node, ast.Constant):
            hit = isinstance(node.value, str) and node.value in every
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            hit = bool(set(node.names) & every)
        elif isinstance(node, BINDERS):
            hit = any(isinstance(value, str) and value.split(".")[0] in every
                      for value in (getattr(node, field, None) for field in ("name", "asname", "arg", "rest")))
        else:
            continue
        if hit:
            return True
    return False


def _own_names(parsed, names, nodes):
    """The contract's names this module defines at its top level, which ``globals()["name"]`` reads exactly as
    the module's plain use of ``name`` does (which no scan charges): a contract name may be a forbidden API's
    too (a lesson's own attention function, say), and ``globals()["that name"]`` then calls the student's own.
    None where that equivalence may not hold: the file binds ``globals`` or names ``builtins`` anywhere (a
    ``globals`` of its own could return torch's namespace). Every other look-up, in any object, counts (fail
    closed): a name bound to torch can hide in any of them (an attribute, a parameter, a table)."""
    if not any(isinstance(node, ast.Call) and _own_namespace(node) for node in nodes):
        return frozenset()  # nothing read from globals(): nothing to exempt (most files; the walk below is dearer)
    if _may_set(nodes, bound={"globals"}, named={"builtins", "__builtins__"}, attributes=BUILTINS):
        return frozenset()
    defined = {node.name for node, _ in parsed.parts
               if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    return frozenset(defined & set(names))


def _hits(nodes, aliases, direct, forbidden, own=frozenset(), names=None):
    """The forbidden APIs used by ``nodes`` (a statement and every node under it); ``own``: the module's own
    names (:func:`_own_names`); ``names``: a set that gathers every name ``nodes`` use, where given."""
    found = set()
    for sub in nodes:
        if isinstance(sub, ast.Attribute) and sub.attr in forbidden and _root_name(sub) in aliases:
            found.add(forbidden[sub.attr])
        elif isinstance(sub, ast.Name):
            if sub.id in direct:
                found.add(direct[sub.id])
            if names is not None:
                names.add(sub.id)
        elif isinstance(sub, ast.ImportFrom) and (sub.module or "").startswith("torch"):
            found.update(forbidden[a.name] for a in sub.names if a.name in forbidden)
        else:
            found.update(forbidden[name] for text in _looked_up_name(sub, own) for name in _named_by(text)
                         if name in forbidden)
    return found


def _is_main_test(test):
    """``__name__ == "__main__"``, either way round."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    return any(isinstance(side, ast.Name) and side.id == "__name__" for side in sides) and any(
        isinstance(side, ast.Constant) and side.value == "__main__" for side in sides)


def _script_blocks(parsed, nodes):
    """The module's top-level ``if __name__ == "__main__":`` blocks: a student's own checks, run by hand (against
    torch's attention, say), never when the module is graded, where its name is the package's. None where the file
    may rename itself (it binds ``__name__`` or names it in text: ``globals()["__name__"]``), which would run them."""
    blocks = {node for node, _ in parsed.parts if isinstance(node, ast.If) and _is_main_test(node.test)}
    if not blocks:
        return blocks
    return set() if _may_set(nodes, bound={"__name__"}) else blocks


def scan_module(source: str | ParsedFile | None, module: str, contract: Contract) -> dict[str, set[str]]:
    """``{contract name: set of forbidden APIs}`` for one student file (its text, or its tree already parsed).

    A contract name is charged with what its own definition uses and what the module's other top-level functions
    and classes it names use (a helper, followed through helpers it names); module-level code, and what it names,
    taint every name. A helper nothing names, or an ``if __name__ == "__main__":`` block, is not charged: a
    student's own check against torch's attention, say, which grading never runs (one reached some other way is
    the tripwires' to see)."""
    parsed = source if isinstance(source, ParsedFile) or source is None else parse(source)
    if parsed is None:
        return {}  # a syntax error: the import will fail and say so (a file past the parser's limits: refused)
    forbidden = contract.forbidden_by_name
    nodes = parsed.nodes()
    aliases, direct = _torch_aliases(nodes, forbidden)
    names = [name for name, owner in contract.names.items() if owner == module]
    own = _own_names(parsed, names, nodes)
    uses, named, module_named, module_level = {}, {}, set(), set()
    script_only = _script_blocks(parsed, nodes)
    for node, under in parsed.parts:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if node in script_only:  # never run when graded: only its else branch is module-level code
            under = [sub for branch in node.orelse for sub in source_tree.nodes_under(branch)]
        refers = set()
        found = _hits(under, aliases, direct, forbidden, own, refers)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):  # defined twice: both count
            uses.setdefault(node.name, set()).update(found)
            named.setdefault(node.name, set()).update(refers - {node.name})
        else:
            module_level |= found
            module_named |= refers

    def reach(start):
        seen, stack = set(), [name for name in start if name in uses]
        while stack:
            name = stack.pop()
            if name not in seen:
                seen.add(name)
                stack.extend(other for other in named[name] if other in uses and other not in seen)
        return seen

    result = {}
    for name in names:
        if name in uses:
            helpers = reach([name])
            found = set().union(*(uses[helper] for helper in helpers))
            if found:
                result[name] = found
    everywhere = module_level.union(*(uses[helper] for helper in reach(module_named)))
    if everywhere:
        for name in names:
            result.setdefault(name, set()).update(everywhere)
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
