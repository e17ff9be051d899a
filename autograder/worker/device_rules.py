"""The GPU's device rules: which tensors may meet in one operation on a GPU (:mod:`.simulated_gpu` applies them).

A CUDA kernel accepts tensors of its own device and CPU 0-dim tensors (a
``torch.tensor(-1e9)`` fill value, say); any other CPU tensor it meets (a mask
built in ``forward`` without ``device=``) is an error. These are the rules
PyTorch's fake tensors apply (``_find_common_device``), without their cost (a
fake-tensor call touches thousands of the warm worker's pages, each a
copy-on-write fault in a fresh fork). The matrix products also refuse operands
of two dtypes, as the GPU and the CPU do.
"""

import torch

_aten = torch.ops.aten
# Operations that take tensors of two devices on a GPU too: copies between devices, CPU index tensors.
MIXED_DEVICES = frozenset({_aten.copy_.default, _aten._to_copy.default, _aten._foreach_copy.default,
                           _aten.index.Tensor, _aten.index_put.default, _aten.index_put_.default,
                           _aten._index_put_impl_.default})


# Operations that multiply matrices. A GPU (and the CPU) refuses operands of two dtypes (float32 weights meeting a
# float64 input, say): the rules refuse them all, as the GPU does (a RuntimeError of the dtype's, not a device
# mismatch), whatever a kernel underneath would let through.
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
    can tell the rules' refusal from the code's other errors and report it as a GPU would."""


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
