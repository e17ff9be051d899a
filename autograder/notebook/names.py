"""What a notebook's names become in the judge: plain data fetched from the worker, a :class:`NotebookFunction`
called through it, or :class:`NotData` (anything else), which fails the check that touches it."""

import functools
import importlib

from ..worker import protocol


TRUSTED_MODULES = ("torch", "math", "torch.nn.functional", "torch.nn")  # modules a check may be handed as such


class NotDataError(Exception):
    """A check touched a name whose value is not data."""


class NotData:
    """Stands for a notebook value that is not data: every use fails the check, with the name in the reason."""

    __slots__ = ("_label", "_touched")

    def __init__(self, label, touched):
        object.__setattr__(self, "_label", label)
        object.__setattr__(self, "_touched", touched)

    def _refuse(self, *args, **kwargs):
        self._touched.append(self._label)
        raise NotDataError(self._label)

    def __getattr__(self, name):
        self._refuse()

    def __repr__(self):
        return f"<not data: {self._label}>"

    __hash__ = None


for _name in ("eq", "ne", "lt", "le", "gt", "ge", "bool", "len", "iter", "getitem", "contains", "call", "float",
              "int", "index", "complex", "add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv",
              "floordiv", "rfloordiv", "mod", "rmod", "pow", "rpow", "matmul", "rmatmul", "neg", "pos", "abs",
              "and", "rand", "or", "ror", "xor", "invert", "round", "array", "format", "setattr", "setitem"):
    setattr(NotData, f"__{_name}__", NotData._refuse)


@functools.cache
def trusted_module(name):
    """A module a check may use by the notebook's name for it: the judge's own copy, never the notebook's object
    (imported here, not at start-up: the judge's first torch import overlaps its zygote's)."""
    return importlib.import_module(name)


def is_plain(value, depth=0):
    """Whether ``value`` (decoded from a reply) is data all the way down."""
    import torch

    if value is None or isinstance(value, (bool, int, float, str, torch.Tensor, torch.dtype)):
        return True
    if isinstance(value, (list, tuple)) and depth < protocol.MAX_DEPTH:
        return all(is_plain(item, depth + 1) for item in value)
    if isinstance(value, dict) and depth < protocol.MAX_DEPTH:
        return all(is_plain(item, depth + 1) for item in value.values())
    return False


class NotebookFunction:
    """A function the notebook defined: each call goes to the worker with data and comes back as data."""

    def __init__(self, runner, handle, name):
        self._runner, self._handle, self._name = runner, handle, name

    def __call__(self, *args, **kwargs):
        value = self._runner.request({"op": "nbcall", "handle": self._handle, "args": list(args), "kwargs": kwargs},
                                     self._name)
        if not is_plain(value):
            self._runner.touched.append(f"what {self._name} returned")
            raise NotDataError(f"what {self._name} returned")
        return value

    def __repr__(self):
        return f"<notebook function {self._name}>"
