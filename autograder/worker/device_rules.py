"""The GPU's device rules, applied on the meta device: how the device checks run without a GPU.

A CUDA kernel accepts tensors of its own device and CPU 0-dim tensors (a
``torch.tensor(-1e9)`` fill value, say); any other CPU tensor it meets (a mask
built in ``forward`` without ``device=``) is an error. Plain meta kernels are
both stricter (a CPU 0-dim value is refused) and laxer (``meta @ cpu`` runs),
so :class:`DeviceRules` checks every operation's tensors as CUDA would, then
runs it on meta with any CPU 0-dim argument moved there. These are the rules
PyTorch's fake tensors apply (``_find_common_device``), at a fraction of their
cost: a fake-tensor call touches thousands of the warm worker's pages, each a
copy-on-write fault in a fresh fork. The matrix products also refuse operands of
two dtypes, as the GPU and the CPU do (the meta kernels let some through).
"""

import torch
from torch.utils._python_dispatch import TorchDispatchMode

_aten = torch.ops.aten
# Operations that take tensors of two devices on a GPU too: copies between devices, CPU index tensors.
MIXED_DEVICES = frozenset({_aten.copy_.default, _aten._to_copy.default, _aten._foreach_copy.default,
                           _aten.index.Tensor, _aten.index_put.default, _aten.index_put_.default,
                           _aten._index_put_impl_.default})


# Operations that multiply matrices. A GPU (and the CPU) refuses operands of two dtypes (float32 weights meeting a
# float64 input, say); the meta device's kernels let some through and refuse others, Python's and compiled alike,
# so the rules below refuse them all, as the GPU does (a RuntimeError of the dtype's, not a device mismatch).
SAME_DTYPE = frozenset({_aten.mm.default, _aten.bmm.default, _aten.addmm.default, _aten.baddbmm.default,
                        _aten.addbmm.default, _aten.mv.default, _aten.addmv.default, _aten.dot.default,
                        _aten.vdot.default, _aten._addmm_activation.default})


def _tensors(values):
    for value in values:
        if isinstance(value, torch.Tensor):
            yield value
        elif isinstance(value, (list, tuple)):
            yield from (item for item in value if isinstance(item, torch.Tensor))


class DeviceMismatch(RuntimeError):
    """Two devices in one operation, refused as a GPU refuses them. A ``RuntimeError``, as PyTorch's own refusal
    on a GPU is (a student's ``except RuntimeError`` meets it as it would there); a class of its own so the worker
    can tell the rules' refusal from the meta device's other errors and report it as a GPU would."""


def _moved(value, device):
    """``value`` with each tensor not on ``device`` (a CPU 0-dim one) replaced by a 0-dim tensor there."""
    if isinstance(value, torch.Tensor):
        return value if value.device == device else torch.empty((), dtype=value.dtype, device=device)
    if isinstance(value, (list, tuple)):
        return type(value)(_moved(item, device) for item in value)
    return value


def common_device(func, tensors):
    """``(device, moved)``: the device an operation on ``tensors`` runs on, and whether a CPU 0-dim tensor joins
    from another device. Raises :class:`DeviceMismatch` (a ``RuntimeError``) where a GPU would: two devices,
    neither a CPU 0-dim tensor."""
    device, scalar, moved = None, False, False
    for tensor in tensors:
        zero_dim_cpu = tensor.device.type == "cpu" and tensor.dim() == 0
        if device is None:
            device, scalar = tensor.device, zero_dim_cpu
        elif tensor.device == device:
            scalar = scalar and zero_dim_cpu
        elif zero_dim_cpu:
            moved = True
        elif scalar:  # so far only CPU 0-dim tensors: they join this one's device
            device, scalar, moved = tensor.device, False, True
        else:
            raise DeviceMismatch(f"Expected all tensors to be on the same device, but found at least two devices, "
                                 f"{device} and {tensor.device} (in {func})")
    return device, moved


class DeviceRules(TorchDispatchMode):
    """Inside ``with DeviceRules():`` every ATen operation obeys the GPU's device rules (see the module)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in SAME_DTYPE:
            dtypes = {tensor.dtype for tensor in _tensors((*args, *kwargs.values()))}
            if len(dtypes) > 1:
                raise RuntimeError(f"expected both operands to have the same dtype, but got "
                                   f"{' and '.join(sorted(str(dtype) for dtype in dtypes))} (in {func})")
        if func not in MIXED_DEVICES:
            device, moved = common_device(func, _tensors((*args, *kwargs.values())))
            if moved:
                args, kwargs = _moved(args, device), {key: _moved(value, device) for key, value in kwargs.items()}
        return func(*args, **kwargs)


# ---------------------------------------------------------------- the meta device's kernels

# PyTorch registers a Python meta kernel for over a thousand ATen operations, over the compiled (C++) one where there
# is one: the compiler's fake tensors need the Python ones (symbolic shapes), the meta device with concrete shapes
# does not. A Python kernel costs 0.1-0.7 ms a call (``addmm``, under every ``nn.Linear``: 0.6 ms, against 0.01 ms
# compiled), most of a fake-device check's time. So the worker runs each operation that has a compiled meta kernel
# on it, keeps the Python kernel of every other one, and puts them all back before anything compiles.
_kept: list = []  # the Library objects made here: one unregisters its kernels when it is collected
_set_aside: list = []  # (operation, its Python meta kernel) for the operations now on their compiled kernel


def prefer_compiled_meta_kernels() -> None:
    """Unregister PyTorch's Python meta kernels of the operations that have a compiled one (see above); once."""
    import torch._meta_registrations as registrations
    from torch._decomp import global_decomposition_table

    library = registrations._meta_lib_dont_use_me_use_register_meta
    if _kept or library.m is None:
        return
    kernels = {}
    for kind in ("meta", "post_autograd", "pre_autograd"):  # the precedence PyTorch's own registration uses
        for operation, kernel in global_decomposition_table[kind].items():
            if isinstance(operation, torch._ops.OpOverload):
                kernels.setdefault(f"{operation.namespace}/{operation.name().split('::', 1)[1]}/Meta",
                                   (operation, kernel))
    registered = [kernels[key] for key in library._op_impls if key in kernels]
    if len(registered) != len(library._op_impls):  # a registration this cannot name: leave them all as they are
        return
    library._destroy()
    _kept.append(library)  # collected, it would also drop torch's record of the kernels registered again below
    python = torch.library.Library("aten", "IMPL", "Meta")
    _kept.append(python)
    registrations._meta_lib_dont_use_me_use_register_meta = python  # later registrations land in a live library
    for operation, kernel in registered:
        if torch._C._dispatch_has_kernel_for_dispatch_key(operation.name(), "Meta"):
            _set_aside.append((operation, kernel))
        else:
            python.impl(operation, kernel)


def restore_python_meta_kernels() -> None:
    """Register again the Python meta kernels :func:`prefer_compiled_meta_kernels` set aside (before the compiler's
    fake tensors, which need them, run)."""
    if not _set_aside:
        return
    python = torch.library.Library("aten", "IMPL", "Meta")
    _kept.append(python)
    for operation, kernel in _set_aside:
        python.impl(operation, kernel)
    _set_aside.clear()
