"""A call that failed on the fake device, run again on the CPU: is it the device, or the code?

The fake device (meta tensors under :mod:`.device_rules`) can raise where the
student's own CPU run raises something else (``NotImplementedError`` for a
meta tensor's values, where the CPU gives the ``IndexError`` the code earns),
and it raises for device mistakes the CPU never sees. So the worker runs the
same call once more on the CPU, with real tensors of the judge's shapes and
dtypes, and reports which of the two the student would meet. The rerun is part
of the same request: it counts under the same per-call CPU limit.
"""

from __future__ import annotations

import itertools
from typing import Any

import torch


def real_twin(value: Any) -> Any:
    """``value`` with every meta tensor replaced by a CPU tensor of its shape and dtype: all ``True`` for a
    boolean one (a mask that blocks nothing, so no row is left without a key), zeros otherwise; lists, tuples
    and dicts are rebuilt around them, anything else is kept."""
    if isinstance(value, torch.Tensor):
        if value.device.type != "meta":
            return value
        fill = torch.ones if value.dtype == torch.bool else torch.zeros
        return fill(tuple(value.shape), dtype=value.dtype)
    if isinstance(value, (list, tuple)):
        return type(value)(real_twin(item) for item in value)
    if isinstance(value, dict):
        return {key: real_twin(item) for key, item in value.items()}
    return value


def _on_cpu(tensor: torch.Tensor) -> torch.Tensor:
    """A module's parameter or buffer as it would be on the CPU (a meta one has no values: zeros, as above)."""
    if tensor.device.type == "cpu":
        return tensor
    return real_twin(tensor) if tensor.device.type == "meta" else tensor.detach().to("cpu")


def rerun_on_cpu(function: Any, args: Any, kwargs: dict) -> BaseException | None:
    """Run ``function(*args, **kwargs)`` (a module: its forward, with its registered state as it is on the CPU)
    with the fake device's tensors made real on the CPU; return what it raised, or None when it ran. The caller
    seeds the generators first, as before any call of the student's code."""
    args, kwargs = real_twin(args), real_twin(kwargs)
    try:
        if isinstance(function, torch.nn.Module):
            state = {name: _on_cpu(tensor)
                     for name, tensor in itertools.chain(function.named_parameters(), function.named_buffers())}
            torch.func.functional_call(function, state, tuple(args), kwargs, strict=False)
        else:
            function(*args, **kwargs)
    except BaseException as error:  # noqa: BLE001 - a student's SystemExit is an answer too
        return error
    return None
