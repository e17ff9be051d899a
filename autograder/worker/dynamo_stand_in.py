"""A stand-in for ``torch._dynamo`` while nothing in the worker compiles.

torch's Python kernels (the meta device's, which the fake-device checks run on, and every dispatch mode's
``__torch_dispatch__``) are wrapped so that their first call imports ``torch._dynamo``, only to mark them as
code the compiler must not trace. That import costs more than ``import torch`` itself (about 1.4 s here) and buys
nothing where no compiler runs. So the worker installs this stand-in before it warms up: its ``disable`` hands the
function back unchanged (with no compiler running, an undisabled function behaves the same), ``graph_break`` and
``is_compiling`` answer as the real ones do outside a compiled region, and anything else
asked of ``torch._dynamo`` (``torch.compile``, its config, a submodule) first swaps in the real package, once,
so a submission that compiles works as it would anywhere.

Trusted code, imported by the worker before any student code runs. It changes no value any call returns.
"""

import importlib
import importlib.abc
import importlib.machinery
import os
import sys
import types

NAME = "torch._dynamo"


class StandIn(types.ModuleType):
    """``torch._dynamo`` until something needs more than ``disable``; then the real one (see the module)."""

    def __init__(self, torch):
        super().__init__(NAME)
        # A package's path, so ``import torch._dynamo.<submodule>`` reaches the finder below, not an error.
        self.__path__ = [os.path.join(os.path.dirname(torch.__file__), "_dynamo")]
        self._torch, self._finder = torch, _Finder(self)

    def install(self):
        sys.modules[NAME] = self
        self._torch._dynamo = self
        sys.meta_path.insert(0, self._finder)

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

    def real(self):
        """Swap in and return the real ``torch._dynamo`` (imported now, unless an earlier swap did), with the
        Python meta kernels its fake tensors need registered again (:mod:`.device_rules`)."""
        from .device_rules import restore_python_meta_kernels

        restore_python_meta_kernels()
        if sys.modules.get(NAME) is self:
            del sys.modules[NAME]
            if getattr(self._torch, "_dynamo", None) is self:
                del self._torch._dynamo
        if self._finder in sys.meta_path:
            sys.meta_path.remove(self._finder)
        return importlib.import_module(NAME)

    def __getattr__(self, name):
        if name.startswith("__"):  # the import system's own questions (__spec__, __file__, ...)
            raise AttributeError(name)
        return getattr(self.real(), name)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds ``torch._dynamo.<submodule>`` by swapping in the real package first; a submodule that the real
    package's import already loaded is handed over as it is, never run twice."""

    def __init__(self, stand_in):
        self.stand_in = stand_in

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith(NAME + "."):
            return None
        self.stand_in.real()
        loaded = sys.modules.get(fullname)
        if loaded is None:
            return importlib.machinery.PathFinder.find_spec(fullname, sys.modules[NAME].__path__)
        return importlib.machinery.ModuleSpec(fullname, _Loaded(loaded))


class _Loaded(importlib.abc.Loader):
    def __init__(self, module):
        self.module = module

    def create_module(self, spec):
        return self.module

    def exec_module(self, module):
        pass


def install(torch) -> None:
    """Stand in for ``torch._dynamo`` unless the real one is loaded already."""
    if NAME not in sys.modules:
        StandIn(torch).install()
