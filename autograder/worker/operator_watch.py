"""Tripwires at PyTorch's dispatcher: a forbidden function that is also one of its operators
(``torch.ops.aten.<name>``) is watched below every Python name it goes by.

The session's tripwires replace a function where a module keeps it; the same kernel is also reachable through
names no tripwire can replace (a class's attributes, ``torch._C._VariableFunctions``; the operator objects of
``torch.ops.aten`` and ``torch._C._jit_get_operation``), looked up by a name the static scan cannot read. Every
such call goes through the dispatcher, where a kernel registered for the operator runs whatever the caller's
path. The kernel records the call, then answers as the library would: a composite operator by its own
decomposition, any other one by its own kernel (autograd intact either way). Operators only (no cost to any
other call).

Submission code runs in this process and could remove the registration (as it could unwrap a tripwire): this
raises the bar the tripwires raise, no higher. The static scan backs both up.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import operator
import sys
import warnings
from collections.abc import Callable, Iterable

import torch
from torch._C import DispatchKey

# Where the kernel is registered. Every call passes BackendSelect, inference mode's too (it skips autograd only),
# and meets the kernel there: a call to an operator with a kernel of its own goes on below it, after autograd
# has run above. A composite operator runs its decomposition at autograd, before BackendSelect: watched there too.
COMPOSITE_KEYS = ("AutogradCPU", "AutogradCUDA", "AutogradMeta", "AutogradNestedTensor", "BackendSelect")
KERNEL_KEYS = ("BackendSelect",)
BELOW = torch._C._dispatch_keyset_full_after(DispatchKey.BackendSelect)


def operators(path: str) -> tuple:
    """The overloads of the dispatcher operator named by ``path``'s last part (``()`` where it names none)."""
    name = path.rsplit(".", 1)[-1]
    try:
        packet = getattr(torch.ops.aten, name)
    except (AttributeError, RuntimeError):
        return ()
    return tuple(getattr(packet, overload) for overload in packet.overloads())


# The registrations of this process (they last while their library lives) and the paths they watch. The zygote
# registers once and its workers inherit the dispatcher's tables: a worker only says where its calls are recorded.
_WATCHED: dict[tuple[str, ...], torch.library.Library | None] = {}
_RECORD: list[Callable[[str], None] | None] = [None]


def watch_operators(paths: Iterable[str]) -> None:
    """Register a recording kernel for each operator among ``paths`` (the contract's ``forbidden``), once a
    process: its calls are recorded where :func:`record_into` says."""
    paths = tuple(paths)
    if paths in _WATCHED:
        return
    library = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "overriding a previously registered kernel": the point here
        for path in paths:
            for op in operators(path):
                composite = torch._C._dispatch_has_kernel_for_dispatch_key(
                    op.name(), DispatchKey.CompositeImplicitAutograd)
                kernel = _kernel(op, path, composite)
                qualified = op.__name__.removesuffix(".default")  # "name" or "name.overload"
                library = library or torch.library.Library("aten", "IMPL")
                for key in COMPOSITE_KEYS if composite else KERNEL_KEYS:
                    try:
                        library.impl(qualified, kernel, key)
                    except RuntimeError:
                        continue  # a key this build does not dispatch on
    _WATCHED[paths] = library


def record_into(record: Callable[[str], None] | None) -> None:
    """Where the watched operators' calls are recorded from now on (the session's list); None: nowhere."""
    _RECORD[0] = record


def _kernel(op, path: str, composite: bool) -> Callable:
    def note():
        record = _RECORD[0]
        if record is not None:
            record(path)

    if composite:
        def watched(*args, **kwargs):
            note()
            return op.decompose(*args, **kwargs)  # the operator's own decomposition: autograd intact
    else:
        def watched(*args, **kwargs):
            note()
            # As the dispatcher itself computes it: the tensors' keys, with what this thread adds (a fake-tensor
            # mode's) and less what it leaves out; then below BackendSelect, to the operator's own kernel.
            keys = [torch._C._dispatch_keys(value) for value in (*args, *kwargs.values())
                    if isinstance(value, torch.Tensor)] or [torch._C.DispatchKeySet(DispatchKey.CPU)]
            keys = (functools.reduce(operator.or_, keys) | torch._C._dispatch_tls_local_include_set()) \
                - torch._C._dispatch_tls_local_exclude_set()
            return op.redispatch(keys & BELOW, *args, **kwargs)
    return watched


COMPILER_CONFIG = "torch._inductor.config"


class _CompilerConfig(importlib.abc.MetaPathFinder):
    """Loads ``torch._inductor.config`` with its attention patterns off (:func:`keep_compiled_attention_unfused`)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != COMPILER_CONFIG:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            run = spec.loader.exec_module

            def exec_module(module):
                run(module)
                module.pattern_matcher = False

            spec.loader.exec_module = exec_module
        return spec


def keep_compiled_attention_unfused() -> None:
    """``torch.compile`` rewrites honest attention (``softmax(q @ k^T) @ v``) into the fused kernel the watch
    records, by its pattern matcher: a compiled submission would be charged for code it never wrote. Its patterns
    are switched off (a compiler's optimisation, not a value: the compiled code computes what the eager code
    does), now where the compiler's config is loaded, else when it loads."""
    config = sys.modules.get(COMPILER_CONFIG)
    if config is not None:
        config.pattern_matcher = False
    elif not any(isinstance(finder, _CompilerConfig) for finder in sys.meta_path):
        sys.meta_path.insert(0, _CompilerConfig())
