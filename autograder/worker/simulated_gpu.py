"""A simulated GPU that carries values: how the device checks run without a GPU.

Each tensor "on the GPU" is a CPU tensor wrapped in :class:`OnGpu`, which says it lives on PyTorch's ``meta``
device (a device every build of PyTorch has; a CPU build refuses any ``cuda`` tensor deep in its C++ code) and
holds real values, so a submission's value-dependent code (``if mask.any()``, ``.item()``, a boolean index) runs
as it would on a real GPU. Inside :func:`simulated_gpu` every ATen operation
obeys the GPU's device rules (:func:`.device_rules.common_device`: tensors of one device, and CPU 0-dim ones such
as a ``torch.tensor(-1e9)`` fill value; any other CPU tensor that meets a GPU tensor is refused with the
``RuntimeError`` a GPU raises) and then runs on the CPU tensors inside; its results are on the GPU again.
Factories asked for that device (``torch.zeros(n, device=x.device)``, ``t.to(x.device)``) make a GPU tensor; ``t.cpu()`` and ``t.to("cpu")`` copy one back. The rules are PyTorch's own (tests/test_units.py compares
them with its fake tensors, case by case).
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._mode_utils import no_dispatch
from torch.utils._python_dispatch import TorchDispatchMode

from .device_rules import MIXED_DEVICES, SAME_DTYPE, _tensors, common_device

INDEX_PUT = frozenset({torch.ops.aten.index_put.default, torch.ops.aten.index_put_.default,
                       torch.ops.aten._index_put_impl_.default})

DEVICE = torch.device("meta")
_aten = torch.ops.aten
_Tensor = torch.Tensor


class OnGpu(torch.Tensor):
    """A tensor on the simulated GPU: ``inner`` (a CPU tensor) holds its values."""

    inner: torch.Tensor

    @staticmethod
    def __new__(cls, inner: torch.Tensor) -> OnGpu:
        made = torch.Tensor._make_wrapper_subclass(cls, inner.shape, strides=inner.stride(), dtype=inner.dtype,
                                                   device=DEVICE, storage_offset=inner.storage_offset(),
                                                   requires_grad=False)
        made.inner = inner
        return made

    __torch_function__ = torch._C._disabled_torch_function_impl  # every operation reaches the dispatch level

    def __repr__(self) -> str:
        return f"{self.inner!r}"[:-1] + ", device='meta')" if self.inner.dim() else f"tensor({self.inner.item()!r})"

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return run_on_gpu(func, args, kwargs or {})


def _map(function, value: Any) -> Any:
    """``value`` with ``function`` applied to each leaf of its lists, tuples and dicts (an operation's arguments and
    results: flat, so a plain walk, at a tenth of ``torch.utils._pytree``'s cost)."""
    if isinstance(value, (list, tuple)):
        mapped = [_map(function, item) for item in value]
        if type(value) in (list, tuple):
            return type(value)(mapped)
        return type(value)(*mapped) if hasattr(value, "_fields") else type(value)(mapped)  # a named result
    if isinstance(value, dict):
        return {key: _map(function, item) for key, item in value.items()}
    return function(value)


def on_gpu(value: Any) -> Any:
    """``value`` with every plain tensor moved onto the simulated GPU (a copy)."""
    return _map(lambda item: OnGpu(item.detach().clone()) if _plain(item) else item, value)


def _plain(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and not isinstance(value, OnGpu)


def _unwrapped(value: Any) -> Any:
    return _map(lambda item: item.inner if isinstance(item, OnGpu) else item, value)


def _wrapped(value: Any, inputs: dict[int, OnGpu]) -> Any:
    """Results on the GPU: an input's own CPU tensor (an in-place operation's result) as that input itself."""
    def wrap(item):
        if not _plain(item):
            return item
        own = inputs.get(id(item))
        return OnGpu(item) if own is None else own

    return _map(wrap, value)


def _gpu_device(device: Any) -> bool:
    try:
        return device is not None and torch.device(device).type == DEVICE.type
    except (RuntimeError, TypeError):
        return False


def run_on_gpu(func, args, kwargs):
    """One ATen operation under the GPU's rules, run on the CPU tensors inside."""
    if func in SAME_DTYPE:
        dtypes = {tensor.dtype for tensor in _tensors((*args, *kwargs.values()))}
        if len(dtypes) > 1:
            raise RuntimeError(f"expected both operands to have the same dtype, but got "
                               f"{' and '.join(sorted(str(dtype) for dtype in dtypes))} (in {func})")
    inputs = {id(item.inner): item for item in _tensors((*args, *kwargs.values())) if isinstance(item, OnGpu)}
    if _gpu_device(kwargs.get("device")):  # a factory asked for the GPU, or a copy onto it
        kwargs = dict(kwargs, device=torch.device("cpu"))
        return _wrapped(func(*_unwrapped(args), **_unwrapped(kwargs)), inputs)
    if func is _aten._to_copy.default and kwargs.get("device") is not None:  # a copy to the CPU
        return func(*_unwrapped(args), **kwargs)
    if not inputs:
        return func(*args, **kwargs)
    if func not in MIXED_DEVICES:
        common_device(func, _tensors((*args, *kwargs.values())))  # raises DeviceMismatch where a GPU would
    elif func in INDEX_PUT:  # CPU indices may meet a GPU tensor; its new values may not (a CPU 0-dim one may)
        common_device(func, [args[0], *_tensors(args[2:3])])
    out = func(*_unwrapped(args), **_unwrapped(kwargs))
    if func is _aten._local_scalar_dense.default:
        return out
    if torch.Tag.inplace_view in func.tags:  # transpose_, unsqueeze_ ...: the wrapper takes the inner's new shape
        with no_dispatch():
            func(*args, **kwargs)
    return _wrapped(out, inputs)


class _Dispatch(TorchDispatchMode):
    """Every ATen operation, factories made inside PyTorch's own code included, under :func:`run_on_gpu`."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return run_on_gpu(func, args, kwargs or {})


class _Functions(TorchFunctionMode):
    """What must be caught before the dispatcher: a factory or a move asked for the GPU (a CPU build of PyTorch
    refuses ``device="cuda"`` before any dispatch), and indexing (which builds its index tensors on the
    indexed tensor's device itself)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is _Tensor.to and _to_gpu(args, kwargs):
            source = args[0]
            dtype = _to_dtype(args, kwargs) if func is _Tensor.to else None
            if isinstance(source, OnGpu):
                return source if dtype in (None, source.dtype) else OnGpu(source.inner.to(dtype))
            return OnGpu(source.detach().to(dtype=dtype or source.dtype, copy=True))
        if func is _Tensor.cpu or func is _Tensor.to and _to_cpu(args, kwargs):
            source = args[0]
            if isinstance(source, OnGpu):
                dtype = _to_dtype(args, kwargs) if func is _Tensor.to else None
                return source.inner.to(dtype=dtype or source.dtype, copy=True)
        if func is _Tensor.numpy and isinstance(args[0], OnGpu):  # as a GPU refuses it
            raise TypeError("can't convert a GPU tensor to numpy: use Tensor.cpu() to copy it to host memory first")
        if func is _Tensor.new_tensor and isinstance(args[0], OnGpu) and not _gpu_device(kwargs.get("device")):
            data = _unwrapped(args[1] if len(args) > 1 else kwargs.get("data"))
            made = torch.as_tensor(data, dtype=kwargs.get("dtype") or args[0].dtype).detach().clone()
            return OnGpu(made)  # on the tensor's device, as new_tensor makes it
        if func in (_Tensor.__getitem__, _Tensor.__setitem__, _Tensor.tolist) and any(
                isinstance(item, OnGpu) for item in _tensors((*args, *kwargs.values()))):
            # Indexing takes CPU indices, and assigning copies a CPU value in: both work on a GPU.
            inputs = {id(item.inner): item for item in _tensors(args) if isinstance(item, OnGpu)}
            return _wrapped(func(*_unwrapped(args), **_unwrapped(kwargs)), inputs)
        if _gpu_device(kwargs.get("device")):  # made on the CPU, its result on the GPU
            return _wrapped(func(*args, **dict(kwargs, device=torch.device("cpu"))), {})
        return func(*args, **kwargs)


def _parsed_to(args, kwargs):
    try:
        return torch._C._nn._parse_to(*args[1:], **kwargs)
    except (TypeError, RuntimeError):
        return None, None, None, None


def _to_gpu(args, kwargs) -> bool:
    return _gpu_device(_parsed_to(args, kwargs)[0])


def _to_cpu(args, kwargs) -> bool:
    device = _parsed_to(args, kwargs)[0]
    return device is not None and torch.device(device).type == "cpu"


def _to_dtype(args, kwargs):
    return _parsed_to(args, kwargs)[1]


@contextlib.contextmanager
def simulated_gpu():
    """Within the block, the GPU's rules hold for every operation and a GPU tensor is an :class:`OnGpu`."""
    with _Functions(), _Dispatch():
        yield
