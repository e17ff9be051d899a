"""Stand-ins for modules that a worker's calls reach for but, with nothing compiling, never need.

torch's Python code imports costly modules lazily, at its first call, for work no worker does:

* ``torch._dynamo`` (the compiler; about 1.4 s, more than ``import torch``): torch's Python kernels (every dispatch
  mode's ``__torch_dispatch__``, the simulated GPU's included, and the meta device's) import it only
  to mark themselves as code the compiler must not trace. :class:`CompilerStandIn`'s ``disable`` hands the
  function back unchanged (with no compiler running, an undisabled function behaves the same), ``graph_break``
  and ``is_compiling`` answer as the real ones do outside a compiled region.
* ``torch.fx.experimental.symbolic_shapes`` (symbolic shapes, with sympy; about 0.5 s, a quarter of a warm
  zygote's start): ``torch._check`` and the Python kernels import it to ask whether a condition or a size holds,
  in words that also cover symbolic ones. With plain shapes, every such question is a plain ``bool`` or ``int``
  and each answer is that value itself: :class:`ShapesStandIn` gives it (:data:`PLAIN`), exactly where the real
  function returns its argument unchanged. Its type promotion imports sympy to ask whether an argument is a sympy
  expression: none is while sympy is not loaded (:class:`SympyStandIn`).

Anything else asked of any of them (``torch.compile``, a symbolic value, a class, a submodule) first swaps in the
real module, once, and is answered by it: a submission that compiles works as it would anywhere. Trusted code,
imported by the worker before any student code runs; it changes no value any call returns. And one shortcut for
torch's own import (:func:`inspect_shortcuts`), in the zygote's and the judge's.
"""

import contextlib
import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import operator
import os
import sys
import types


class StandIn(types.ModuleType):
    """A module installed in ``sys.modules`` under a real module's name until something needs more than it
    offers; then the real one (imported at that moment), for good. ``package``: the real package's folder, so
    that importing one of its submodules swaps in the real package first (:class:`_Finder`)."""

    NAME = ""

    def __init__(self, package=None):
        super().__init__(self.NAME)
        self._finder = None
        if package is not None:
            self.__path__ = [package]  # a package's path, so its submodules' imports reach the finder, not an error
            self._finder = _Finder(self)

    def install(self):
        # The real module's spec (found, not imported): ``importlib.util.find_spec`` of a name in sys.modules
        # reads it, and refuses a module whose spec is None.
        self.__spec__ = importlib.util.find_spec(self.NAME)
        sys.modules[self.NAME] = self
        parent, _, child = self.NAME.rpartition(".")
        if parent:
            setattr(importlib.import_module(parent), child, self)
        if self._finder is not None:
            sys.meta_path.insert(0, self._finder)

    def real(self):
        """Swap in and return the real module (imported now, unless an earlier swap did)."""
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self._finder)
        swapping = sys.modules.get(self.NAME) is self
        if swapping:
            sys.modules.pop(self.NAME, None)
            parent, _, child = self.NAME.rpartition(".")
            if parent and getattr(sys.modules.get(parent), child, None) is self:
                with contextlib.suppress(AttributeError):
                    delattr(sys.modules[parent], child)
        module = importlib.import_module(self.NAME)
        if swapping:
            # A module that imported this stand-in before the swap still holds it: from now on it reads the real
            # module's names (its own answers, set above them, give way; a name the real one gains later is
            # asked of it).
            self.__dict__.update(module.__dict__)
        return module

    def __getattr__(self, name):
        # The import system's and inspect's own questions (__file__, __cached__, ...) are answered "none", as a
        # built-in module's are; what a module offers its users (__all__, __version__) is the real module's.
        if name.startswith("__") and name not in ("__all__", "__version__"):
            raise AttributeError(name)
        return getattr(self.real(), name)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds a stand-in package's submodules by swapping in the real package first; a submodule that the real
    package's import already loaded is handed over as it is, never run twice."""

    def __init__(self, stand_in):
        self.stand_in = stand_in

    def find_spec(self, fullname, path=None, target=None):
        name = self.stand_in.NAME
        if not fullname.startswith(name + "."):
            return None
        self.stand_in.real()
        # Out of sys.modules until the import system puts it back: left there, the import system would take its
        # spec and run its file again, into a second module.
        loaded = sys.modules.pop(fullname, None)
        if loaded is None:
            return importlib.machinery.PathFinder.find_spec(fullname, sys.modules[name].__path__)
        return importlib.machinery.ModuleSpec(fullname, _Loaded(loaded))


class _Loaded(importlib.abc.Loader):
    """Hands an already loaded module to the import system, its own spec kept (the import system sets this
    loader's)."""

    def __init__(self, module):
        self.module, self.spec = module, getattr(module, "__spec__", None)

    def create_module(self, spec):
        return self.module

    def exec_module(self, module):
        if getattr(module, "__spec__", None) is not self.spec:
            with contextlib.suppress(AttributeError):  # a module that refuses new names kept its own anyway
                module.__spec__ = self.spec


class CompilerStandIn(StandIn):
    """``torch._dynamo`` until something needs more than ``disable`` (see the module)."""

    NAME = "torch._dynamo"

    @staticmethod
    def disable(fn=None, recursive=True, *, reason=None, wrapping=True):
        """``torch._dynamo.disable`` where nothing compiles: the function itself (or, without one, a decorator
        that returns its function)."""
        return fn if fn is not None else (lambda function: function)

    @staticmethod
    def graph_break():
        """``torch._dynamo.graph_break`` where nothing compiles: nothing to break (an optimizer's ``step`` calls
        it on every step)."""

    @staticmethod
    def is_compiling():
        return False



class _RealSympyBasic(type):
    """Once sympy is loaded, the placeholder below (held by whoever took it before) answers as ``sympy.Basic``."""

    def __instancecheck__(cls, value):
        real = sys.modules.get(SympyStandIn.NAME)
        return not isinstance(real, StandIn) and real is not None and isinstance(value, real.Basic)

    def __subclasscheck__(cls, other):
        real = sys.modules.get(SympyStandIn.NAME)
        return not isinstance(real, StandIn) and real is not None and issubclass(other, real.Basic)


class _NoSympyObject(metaclass=_RealSympyBasic):
    """``sympy.Basic`` while sympy is not loaded: no object is one (every sympy object is made by the real
    sympy, whose import swaps it in first)."""


class SympyStandIn(StandIn):
    """``sympy`` until something needs more than ``Basic`` (torch's type promotion asks, of every argument,
    whether it is a sympy expression)."""

    NAME = "sympy"
    Basic = _NoSympyObject


def _plain_ints(*values):
    return all(type(value) is int for value in values)


def _plain_int_sequences(x, y):
    return (isinstance(x, (list, tuple)) and isinstance(y, (list, tuple))
            and _plain_ints(*x) and _plain_ints(*y))


# The questions of torch.fx.experimental.symbolic_shapes that torch's Python code asks of plain values, each as
# ``name: (whether the arguments are plain, the real function's answer for them)``. Each answer is what the real
# function computes once it has found its arguments are not symbolic (torch 2.13's code, tests/test_units.py
# checks each against it); any other argument goes to the real function.
PLAIN = {
    "expect_true": (lambda a, skip=0: type(a) is bool, lambda a, skip=0: a),
    "guard_bool": (lambda a: type(a) is bool, lambda a: a),
    "guard_or_false": (lambda a: type(a) is bool, lambda a: a),
    "guard_or_true": (lambda a: type(a) is bool, lambda a: a),
    "statically_known_true": (lambda a: type(a) is bool, lambda a: a),
    "guard_int": (lambda a: type(a) is int, lambda a: a),
    "is_nested_int": (lambda a: type(a) in (int, float, bool), lambda a: False),
    "has_guarding_hint": (lambda a: type(a) in (int, float, bool), lambda a: True),
    "guarding_hint_or_throw": (lambda a: type(a) in (int, bool), lambda a: a),
    "sym_and": (lambda x, *others: all(type(value) is bool for value in (x, *others)),
                lambda x, *others: functools.reduce(operator.and_, others, x)),
    "sym_or": (lambda x, *others: all(type(value) is bool for value in (x, *others)),
               lambda x, *others: functools.reduce(operator.or_, others, x)),
    "sym_eq": (lambda x, y: _plain_ints(x, y) or _plain_int_sequences(x, y),
               lambda x, y: x == y if type(x) is int else len(x) == len(y) and all(map(operator.eq, x, y))),
    # Imported beside the others but deprecated (the real one warns at each call): every call goes to it.
    "guard_size_oblivious": (lambda a: False, None),
}


class ShapesStandIn(StandIn):
    """``torch.fx.experimental.symbolic_shapes`` while every shape is plain (see the module)."""

    NAME = "torch.fx.experimental.symbolic_shapes"

    def __init__(self, package=None):
        super().__init__(package)
        for name, (plain, answer) in PLAIN.items():
            setattr(self, name, self._question(name, plain, answer))

    def _question(self, name, plain, answer):
        def question(*args, **kwargs):
            try:
                is_plain = plain(*args, **kwargs)
            except TypeError:  # called in words it does not know: the real function's to answer (or refuse)
                is_plain = False
            if is_plain:
                return answer(*args, **kwargs)
            if name == "expect_true":  # it names its caller's frame: one more frame up, past this one
                kwargs["skip"] = kwargs.get("skip", args[1] if len(args) > 1 else 0) + 1
                args = args[:1]
            return getattr(self.real(), name)(*args, **kwargs)

        question.__name__ = question.__qualname__ = name
        return question


# Packages torch's own import loads, and nothing a worker runs before a submission asks for them needs: a
# noticeable share of the zygote's start-up (`make bench` measures it). They register no operator a
# worker meets (only torch.export's own ``export::`` one), and hold none of the lesson's forbidden functions.
DEFERRED = ("torch.export", "torch.utils.data", "torch.distributions", "torch.optim", "torch.profiler",
            "torch.quantization")


class Deferred(StandIn):
    """A package of :data:`DEFERRED`, in ``sys.modules`` while torch is imported, so that torch's own import takes
    it for the package. Then (:func:`bind`) it is only its parent's attribute (``torch.optim``): every import of the
    package or of a submodule is the import system's own, as without it (the same module objects, specs and
    names), and makes the real package the parent's attribute; the first use of any of its names, dunder ones too,
    imports it and is answered by it."""

    def real(self):
        if sys.modules.get(self.NAME) is self:  # torch's import still running: swapped in as any stand-in's
            return super().real()
        module = importlib.import_module(self.NAME)  # no window without the attribute: threads may ask at once
        parent, _, child = self.NAME.rpartition(".")
        holder = sys.modules.get(parent)
        if holder is not None and vars(holder).get(child) is self:
            setattr(holder, child, module)
        self.__dict__.update(module.__dict__)  # for whoever holds this stand-in, as any stand-in does
        return module

    def __getattr__(self, name):
        if name.startswith("__") and sys.modules.get(self.NAME) is self:  # the import system's, while torch's runs
            raise AttributeError(name)
        return getattr(self.real(), name)

    def __dir__(self):
        return dir(self.real())


def _spec_unimported(name):
    """The spec of the submodule ``name``, found without importing its parents (None where there is none)."""
    top, *rest = name.split(".")
    spec = importlib.util.find_spec(top)  # a top-level name is found, not imported
    for depth in range(1, len(rest) + 1):
        if spec is None or not spec.submodule_search_locations:
            return None
        spec = importlib.machinery.PathFinder.find_spec(".".join([top, *rest[:depth]]),
                                                        spec.submodule_search_locations)
    return spec


def defer(names=DEFERRED, keep=()) -> list[StandIn]:
    """Before torch is imported: stand in for the packages ``names`` (each until something uses it), save any that
    holds a path of ``keep`` (the contract's forbidden paths: their tripwires go on the real module, where every
    holder sees them) and any whose library is imported already. Return the stand-ins, for :func:`bind`."""
    placed = []
    for name in names:
        if name.partition(".")[0] in sys.modules or any(path == name or path.startswith(name + ".")
                                                        for path in keep):
            continue
        spec = _spec_unimported(name)
        if spec is None or not spec.submodule_search_locations:
            continue
        # Its docstring the real package's, read through the instance (a class's own would answer first).
        kind = type("Deferred", (Deferred,), {"NAME": name, "__doc__": property(lambda self: self.real().__doc__)})
        stand_in = kind(spec.submodule_search_locations[0])
        stand_in.__spec__ = spec
        sys.modules[name] = stand_in
        sys.meta_path.insert(0, stand_in._finder)
        placed.append(stand_in)
    return placed


def bind(placed) -> None:
    """Once torch is imported: each stand-in still in place becomes its parent's attribute only, as an imported
    submodule is (torch's own ``from torch import optim`` binds some; ``torch.utils.data`` only this), and leaves
    ``sys.modules`` and the import system (see :class:`Deferred`); what it still says of itself (its spec, path,
    loader) is asked of the real package."""
    for stand_in in placed:
        if sys.modules.get(stand_in.NAME) is not stand_in:  # swapped in by torch's import already
            continue
        parent, _, child = stand_in.NAME.rpartition(".")
        module = sys.modules.get(parent)
        if module is not None and child not in vars(module):
            setattr(module, child, stand_in)
        del sys.modules[stand_in.NAME]
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(stand_in._finder)
        for name in ("__spec__", "__path__", "__package__", "__loader__", "_finder"):
            stand_in.__dict__.pop(name, None)


def install(torch) -> None:
    """Stand in for ``torch._dynamo``, ``torch.fx.experimental.symbolic_shapes`` and ``sympy``, each unless the
    real one is loaded already (sympy: or not installed, so that importing it fails as it would)."""
    sympy = importlib.util.find_spec(SympyStandIn.NAME) if SympyStandIn.NAME not in sys.modules else None
    packages = {CompilerStandIn: os.path.join(os.path.dirname(torch.__file__), "_dynamo"), ShapesStandIn: None}
    if sympy is not None and sympy.submodule_search_locations:
        packages[SympyStandIn] = sympy.submodule_search_locations[0]
    for stand_in, package in packages.items():
        if stand_in.NAME not in sys.modules:
            stand_in(package).install()


@contextlib.contextmanager
def inspect_shortcuts():
    """While torch is imported, the two questions torch asks ``inspect`` about the frame that registers each of its
    Python kernels, answered without the work whose result torch drops or can have at once (the originals are back
    when the import ends):

    * ``inspect.getframeinfo`` as asked with ``context=0``: the same file name and line, without reading and
      searching the whole source file (and listing every loaded module's file first) for a line that torch drops
      (``torch._library.utils.get_source``): a noticeable share of the import, once per registration.
    * ``inspect.getmodule`` of a frame (the module whose fake kernels torch then checks against its stubs): the
      module its globals name, when that module's file is the frame's own, which is the module ``getmodule`` finds
      by mapping the file of every loaded module, again at each registration. Any other
      question goes to the original.

    In the zygote's start-up and in the judge's."""
    frame_info, module_of = inspect.getframeinfo, inspect.getmodule

    def without_lines(frame, context=1):
        return frame_info(frame, 0)

    def by_globals(thing, _filename=None):
        if inspect.isframe(thing) and _filename is None:
            name = thing.f_globals.get("__name__")
            module = sys.modules.get(name) if isinstance(name, str) else None
            if module is not None and getattr(module, "__file__", None) == thing.f_code.co_filename:
                return module
        return module_of(thing, _filename)

    inspect.getframeinfo, inspect.getmodule = without_lines, by_globals
    try:
        yield
    finally:
        inspect.getframeinfo, inspect.getmodule = frame_info, module_of
