"""Static scan of a submission's source for library calls that skip the assignment's work
(``worker.contract.FORBIDDEN``, the one list; docs and docstrings restate it, tests/test_restatements.py checks).

Reads the text only (``ast``); nothing is imported or run. Only uses count:
attribute accesses on torch, names imported from torch, and names looked up
as strings (``getattr``, an operator's ``"aten::..."``) in whatever object, save
a contract name the module defines read back from its own ``globals()``
(:func:`_own_names`). A forbidden name no contract name shares
(``_scaled_dot_product_attention_math``) counts as an attribute of any object:
a variable, an attribute or a sibling file can hold torch's tables. A plain
string that equals a forbidden name (an ``__all__`` entry, a message) is not a
use. A helper's uses are charged to the contract names that name it, in
the file or a sibling (:func:`scan_module`, :func:`scan_submission`). The
worker's run-time tripwires catch the indirect cases this misses (computed names).
"""

import ast
from dataclasses import dataclass, field

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


# Ways to reach an attribute by its name as a string: getattr(F, "..."), attrgetter("..."), F.__dict__["..."],
# itemgetter("...")(vars(F)).
LOOKUPS = {"getattr", "attrgetter", "itemgetter", "methodcaller", "__getattribute__", "__getattr__", "get", "__getitem__",
           "_jit_get_operation", "_get_operation_overload"}  # the last two: an operator by its name, "aten::..."


def _named_by(text):
    """The names a lookup string names: its dotted parts, an operator's namespace and overload split off
    (``"aten::_scaled_dot_product_attention_math"``, ``"aten._native_multi_head_attention.default"``)."""
    return text.replace("::", ".").split(".")


def _called(func):
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


def _own_namespace(node):
    """Whether ``node`` reads the module's own namespace: ``globals()``."""
    return _namespace_call(node) and node.func.id == "globals"


PASSABLE = {"getattr", "attrgetter", "itemgetter", "methodcaller"}  # look-ups that may be handed on as values


def _handed_on_lookups(under, refers, attributes, forbidden):
    """The forbidden APIs a statement may look up through a look-up function handed to a call rather than called
    (``functools.reduce(getattr, ["_C", "name"], torch)``): every name-like string that call holds (no sentence, a
    docstring's or a message's) is a name it may look up."""
    if refers.isdisjoint(PASSABLE) and attributes.isdisjoint(PASSABLE):
        return set()
    found = set()
    for node in under:
        if isinstance(node, ast.Call) and any(isinstance(arg, (ast.Name, ast.Attribute)) and _called(arg) in PASSABLE
                                              for arg in (*node.args, *(kw.value for kw in node.keywords))):
            found.update(forbidden[name] for sub in source_tree.nodes_under(node)
                         if isinstance(sub, ast.Constant) and isinstance(sub.value, str)
                         and not any(char.isspace() for char in sub.value)
                         for name in _named_by(sub.value) if name in forbidden)
    return found


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
           ast.MatchStar, ast.MatchMapping, ast.keyword)  # the nodes that bind a name in one of _may_set's fields
# (a keyword argument: globals().update(__name__="__main__"))


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


def _hits(nodes, aliases, direct, forbidden, own=frozenset(), names=None, anywhere=frozenset(), attributes=None):
    """The forbidden APIs used by ``nodes`` (a statement and every node under it); ``own``: the module's own
    names (:func:`_own_names`); ``names`` and ``attributes``: sets that gather every name and attribute name
    ``nodes`` use, where given; ``anywhere``: the forbidden names that count on any object (no contract name's)."""
    found = set()
    for sub in nodes:
        if isinstance(sub, ast.Attribute):
            if attributes is not None:
                attributes.add(sub.attr)
            if sub.attr in forbidden and (sub.attr in anywhere or _root_name(sub) in aliases):
                found.add(forbidden[sub.attr])
        elif isinstance(sub, ast.MatchClass):  # case object(name=kernel): an attribute read by a pattern
            found.update(forbidden[name] for name in sub.kwd_attrs if name in anywhere)
        elif isinstance(sub, ast.Name):
            if sub.id in direct:
                found.add(direct[sub.id])
            if names is not None:
                names.add(sub.id)
        elif isinstance(sub, ast.ImportFrom) and (sub.module or "").startswith("torch"):
            found.update(forbidden[a.name] for a in sub.names if a.name in forbidden)
        else:
            texts = _looked_up_name(sub)
            if texts and names is not None:
                names.update(texts)  # a helper read back by its name: globals()["_helper"]
            if texts and own:
                texts = _looked_up_name(sub, own)
            found.update(forbidden[name] for text in texts for name in _named_by(text) if name in forbidden)
    return found


def _is_main_test(test):
    """``__name__ == "__main__"``, either way round."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    return any(isinstance(side, ast.Name) and side.id == "__name__" for side in sides) and any(
        isinstance(side, ast.Constant) and side.value == "__main__" for side in sides)


def _script_blocks(parsed, nodes, dynamic):
    """The module's top-level ``if __name__ == "__main__":`` blocks: a student's own checks, run by hand (against
    torch's attention, say), never when the module is graded, where its name is the package's. None where the file
    may rename itself (it binds ``__name__`` or names it in text: ``globals()["__name__"]``, or reads by a computed
    name anywhere: ``exec``), which would run them."""
    blocks = {node for node, _ in parsed.parts if isinstance(node, ast.If) and _is_main_test(node.test)}
    if not blocks:
        return blocks
    return set() if _may_set(nodes, bound={"__name__"}) or _reads_by_computed_name(nodes, dynamic) else blocks


def _import_time(node):
    """The parts of a top-level definition that run when the file is imported, not when it is called: decorators,
    default values, annotations and base classes, and a class body's statements (a method's parts of the same
    kind included). Their uses are module-level code's."""
    parts = list(node.decorator_list)
    if isinstance(node, ast.ClassDef):
        parts += node.bases + [keyword.value for keyword in node.keywords]
        for statement in node.body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                parts += _import_time(statement)
            else:
                parts.append(statement)
    else:
        arguments = node.args
        parts += [value for value in (*arguments.defaults, *arguments.kw_defaults, node.returns) if value is not None]
        parts += [arg.annotation for arg in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                                             arguments.vararg, arguments.kwarg) if arg is not None and arg.annotation]
    return parts


@dataclass
class _ModuleUses:
    """One file's uses, before they are charged: per top-level function or class (``defs``) and for its
    module-level code (the ``None`` key): the forbidden APIs it uses, the file's own names it names, and what of
    its sibling files it names, as ``(module, name)`` (``name`` None: anything of that module)."""

    uses: dict = field(default_factory=dict)
    named: dict = field(default_factory=dict)
    siblings: dict = field(default_factory=dict)

    def add(self, key, found, refers, siblings):
        self.uses.setdefault(key, set()).update(found)
        self.named.setdefault(key, set()).update(refers - {key})
        self.siblings.setdefault(key, set()).update(siblings)


def _sibling_imports(nodes, contract):
    """How the file binds its sibling files' names, from its imports wherever they stand (a nested import binds
    for the whole file: fail closed): ``{local name: (module, name)}`` (``from .heads import attend``),
    ``{local name: module}`` (``from . import heads``; ``None``: the package itself, ``import <package>``) and the
    modules imported with ``*`` (``None``: every sibling)."""
    names, modules, stars = {}, {}, set()
    package = contract.package

    def bind_module(local, stem):
        if stem in contract.modules:
            modules[local] = stem
        elif stem in contract.names:
            names[local] = (contract.names[stem], stem)
        else:
            names[local] = (None, stem)  # something else of the package: no telling what, so anything of it

    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] != package:
                    continue
                if alias.asname is None:
                    modules[package] = None  # binds the package; <package>.heads.attend is read through it
                elif len(parts) == 1:
                    modules[alias.asname] = None
                else:
                    bind_module(alias.asname, parts[1])
        elif isinstance(node, ast.ImportFrom):
            dotted = (node.module or "").split(".") if node.module else []
            if node.level == 1:
                stem = dotted[0] if dotted else None
            elif node.level == 0 and dotted and dotted[0] == package:
                stem = dotted[1] if len(dotted) > 1 else None
            else:
                continue
            for alias in node.names:
                if alias.name == "*":
                    stars.add(stem if stem in contract.modules else None)
                elif stem is None:
                    bind_module(alias.asname or alias.name, alias.name)
                elif stem in contract.modules:
                    names[alias.asname or alias.name] = (stem, alias.name)
    return names, modules, stars


# Code that reads by a name computed at run time: these builtins, and what a file imports from sys, importlib or
# builtins that does (import_module, sys.modules, a frame's globals); globals(), vars() or locals() searched by a
# key that is not a constant. Plain reads (sys.float_info, importlib.reload, print(locals())) are not.
DYNAMIC = {"__import__", "eval", "exec", "__builtins__"}
DYNAMIC_ATTRIBUTES = {"__import__", "import_module", "__globals__", "f_globals", "f_locals", "_getframe",
                      "__self__"}  # print.__self__: the builtins module
DYNAMIC_IMPORTS = {"importlib": {"import_module", "__import__"}, "sys": {"modules", "_getframe"},
                   "builtins": None}  # None: anything of it
NAMESPACES = {"globals", "vars", "locals"}


def _dynamic_names(nodes):
    """``{name: kind}`` for the names that read by a computed name: ``DYNAMIC`` and what the file binds from
    ``DYNAMIC_IMPORTS`` (kind "any"), and the names it binds to sys (kind "sys": only ``.modules`` counts)."""
    found = dict.fromkeys(DYNAMIC, "any")
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                if top == "sys" or top == "builtins":
                    found[(alias.asname or top)] = "sys" if top == "sys" else "any"
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in DYNAMIC_IMPORTS:
            names = DYNAMIC_IMPORTS[node.module]
            found.update((alias.asname or alias.name, "any") for alias in node.names
                         if names is None or alias.name in names)
    return found


def _namespace_call(node):
    """Whether ``node`` is ``globals()``, ``vars()`` or ``locals()``: a namespace, searched by name."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in NAMESPACES \
        and not node.args and not node.keywords


def _reads_by_computed_name(under, dynamic):
    """Whether a statement may reach code by a name built at run time (``eval``, ``sys.modules``,
    ``importlib.import_module``, ``globals()[name]``, ``vars().update(...)``): then anything of any file is within
    its reach (fail closed). ``globals()`` read with a constant key names what it reads: not counted."""
    searched, keyed = set(), set()
    called = {id(node.func) for node in under if isinstance(node, ast.Call)}
    for node in under:
        if isinstance(node, ast.Name):
            if dynamic.get(node.id) == "any" or node.id in NAMESPACES and id(node) not in called:
                return True  # eval, or globals handed on (g = globals)
        elif isinstance(node, ast.Attribute):
            if node.attr in DYNAMIC_ATTRIBUTES or node.attr == "modules" and isinstance(node.value, ast.Name) \
                    and dynamic.get(node.value.id) == "sys":
                return True
            if _namespace_call(node.value):
                searched.add(id(node.value))
        elif isinstance(node, ast.Subscript) and _namespace_call(node.value):
            searched.add(id(node.value))
            if isinstance(node.slice, ast.Constant):
                keyed.add(id(node.value))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                "get", "__getitem__") and _namespace_call(node.func.value) and node.args \
                and isinstance(node.args[0], ast.Constant):
            keyed.add(id(node.func.value))
    return bool(searched - keyed)


NAMESPACE_DUNDERS = {"__dict__", "__getattribute__", "__getattr__"}  # other dunders (__name__, __file__) read no code


def _chains(under):
    """The outermost ``a.b.c`` attribute chains in ``under``, as name lists, and the ids of the names that root
    them (a name that roots none is used bare: a module passed around)."""
    inner = {id(node.value) for node in under if isinstance(node, ast.Attribute)}
    chains, roots = [], set()
    for node in under:
        if isinstance(node, ast.Attribute) and id(node) not in inner:
            parts = []
            while isinstance(node, ast.Attribute):
                parts.append(node.attr)
                node = node.value
            if isinstance(node, ast.Name):
                roots.add(id(node))
                chains.append([node.id, *reversed(parts)])
    return chains, roots


def _sibling_refs(under, refers, attributes, imports, contract, bound, dynamic):
    """What of the sibling files one statement names, as ``(module, name)``: ``name`` None for anything of the
    module, ``module`` None for anything of the package (and of its own file). ``refers``, ``attributes``: the
    names and attribute names it uses; ``bound``: every file's top-level names (for ``*``); ``dynamic``: the
    names that read by a computed name (:func:`_reads_by_computed_name`)."""
    names, modules, stars = imports
    if (not refers.isdisjoint(dynamic) or not refers.isdisjoint(NAMESPACES)
            or not attributes.isdisjoint(DYNAMIC_ATTRIBUTES | {"modules"})) and _reads_by_computed_name(under, dynamic):
        return {(None, None)}
    refs = {names[name] for name in refers if name in names}
    for star in stars:
        for stem in (contract.modules if star is None else [star]):
            refs.update((stem, name) for name in refers if name in bound.get(stem, ()))
    if not modules or not refers & set(modules):
        return refs
    chains, roots = _chains(under)
    for chain in chains:
        if chain[0] not in modules:
            continue
        stem, rest = modules[chain[0]], chain[1:]
        if stem is None:  # the package: <package>.heads.attend, or a name it re-exports, <package>.attend
            if rest[0] in contract.modules:
                stem, rest = rest[0], rest[1:]
            elif rest[0] in contract.names:
                stem = contract.names[rest[0]]
        # A module's namespace read through a dunder (heads.__dict__["attend"]): anything of it
        refs.add((stem, rest[0] if stem is not None and rest and rest[0] not in NAMESPACE_DUNDERS else None))
    reloaded = {id(arg) for node in under if isinstance(node, ast.Call) and _called(node.func) == "reload"
                for arg in node.args}  # importlib.reload(heads): runs its top-level code again, reads nothing
    for node in under:  # a module itself used bare (passed on, getattr'd): anything of it
        if isinstance(node, ast.Name) and node.id in modules and id(node) not in roots:
            refs.add((modules[node.id], "__name__" if id(node) in reloaded else None))
    return refs


def _top_bound(parsed):
    """The names a file binds at its top level (definitions, assignments, imports): what ``*`` takes from it."""
    bound = set()
    for node, under in parsed.parts:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
            continue
        for sub in under:
            if isinstance(sub, ast.Name) and not isinstance(sub.ctx, ast.Load):
                bound.add(sub.id)
            elif isinstance(sub, ast.alias):
                bound.add((sub.asname or sub.name).split(".")[0])
    return bound


def _module_uses(parsed, module, contract, bound):
    """The :class:`_ModuleUses` of one parsed file."""
    forbidden = contract.forbidden_by_name
    nodes = parsed.nodes()
    statements = [node for node in nodes if isinstance(node, (ast.Import, ast.ImportFrom))]  # wherever they stand
    aliases, direct = _torch_aliases(statements, forbidden)
    own = _own_names(parsed, [name for name, owner in contract.names.items() if owner == module], nodes)
    anywhere = frozenset(forbidden) - set(contract.names)
    imports = _sibling_imports(statements, contract)
    dynamic = _dynamic_names(statements)
    found_uses = _ModuleUses()
    script_only = _script_blocks(parsed, nodes, dynamic)

    def scan(key, under):
        refers, attributes = set(), set()
        found = _hits(under, aliases, direct, forbidden, own, refers, anywhere, attributes)
        found |= _handed_on_lookups(under, refers, attributes, forbidden)
        found_uses.add(key, found, refers, _sibling_refs(under, refers, attributes, imports, contract, bound, dynamic))

    for node, under in parsed.parts:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if node in script_only:  # never run when graded: only its else branch is module-level code
            under = [sub for branch in node.orelse for sub in source_tree.nodes_under(branch)]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):  # defined twice: both count
            scan(node.name, under)
            early = _import_time(node)
            if early:  # a decorator, a default, a class attribute: run on import, as module-level code is
                scan(None, [sub for part in early for sub in source_tree.nodes_under(part)])
        else:
            scan(None, under)
    return found_uses


def _reach(files, start):
    """Every forbidden API reached from ``start``, ``(module, name)`` pairs (``name`` None: the module's top-level
    code), through the helpers each names, in its file or a sibling; reaching a sibling runs its top-level code
    too (it is imported), and a module or package used bare reaches all of it."""
    found, seen, stack = set(), set(), list(start)
    while stack:
        key = stack.pop()
        if key in seen:
            continue
        seen.add(key)
        module, name = key
        uses = files[module]
        if name not in uses.uses:
            continue  # a file with no top-level code
        found |= uses.uses[name]
        stack.extend((module, other) for other in uses.named[name] if other in uses.uses)
        for stem, other in uses.siblings[name]:
            for target in (files if stem is None else [stem] if stem in files else []):
                stack.append((target, None))
                if stem is None or other is None:
                    stack.extend((target, helper) for helper in files[target].uses)
                elif other in files[target].uses:
                    stack.append((target, other))
    return found


def _charge(files: dict[str, _ModuleUses], contract: Contract) -> dict[str, set[str]]:
    """``{contract name: forbidden APIs}``: what each name reaches, and what its file's top-level code reaches
    (run on import: it taints every name of the file)."""
    result = {}
    for module, uses in files.items():
        everywhere = _reach(files, [(module, None)]) if None in uses.uses else set()
        for name, owner in contract.names.items():
            if owner != module:
                continue
            found = (_reach(files, [(module, name)]) if name in uses.uses else set()) | everywhere
            if found:
                result[name] = found
    return result


def scan_module(source: str | ParsedFile | None, module: str, contract: Contract) -> dict[str, set[str]]:
    """``{contract name: set of forbidden APIs}`` for one student file (its text, or its tree already parsed), read
    alone: what it names of its sibling files is charged by :func:`scan_submission`.

    A contract name is charged with what its own definition uses and what the module's other top-level functions
    and classes it names use (a helper, followed through helpers it names); module-level code, and what it names,
    taint every name. A helper nothing names, or an ``if __name__ == "__main__":`` block, is not charged: a
    student's own check against torch's attention, say, which grading never runs (one reached some other way is
    the tripwires' to see)."""
    parsed = source if isinstance(source, ParsedFile) or source is None else parse(source)
    if parsed is None:
        return {}  # a syntax error: the import will fail and say so (a file past the parser's limits: refused)
    return _charge({module: _module_uses(parsed, module, contract, {})}, contract)


def scan_submission(files: dict[str, bytes], contract: Contract,
                    parsed: dict[str, ParsedFile | None] | None = None) -> dict[str, set[str]]:
    """``files`` maps module name to its bytes; returns ``{name: set of APIs}``, as :func:`scan_module` charges
    each file, and with a helper one file imports from another charged to the names that reach it
    (``from .heads import attend``, ``heads.attend``, ``<package>.heads.attend``). ``parsed``: the files' trees,
    when the caller has them (:func:`.source_tree.parse_files`)."""
    trees = {}
    for module, data in files.items():
        tree = parsed[module] if parsed is not None and module in parsed else parse(data)
        if tree is not None:  # a syntax error: the import will fail and say so
            trees[module] = tree
    bound = {}
    if any(isinstance(node, ast.ImportFrom) and any(alias.name == "*" for alias in node.names)
           for tree in trees.values() for node, _ in tree.parts):  # only * needs them (top-level only, as * is)
        bound = {module: _top_bound(tree) for module, tree in trees.items()}
    return _charge({module: _module_uses(tree, module, contract, bound) for module, tree in trees.items()},
                   contract)
