"""Helpers the public tests share."""

import pytest
import torch

# The four projection layers of MultiHeadAttention, in the order nn.MultiheadAttention packs q, k and v.
PROJECTIONS = ("q_linear", "k_linear", "v_linear", "out_proj")


def must_raise(expected, call, what):
    """``call()`` must raise ``expected`` (an exception type); anything else fails naming ``what``."""
    try:
        call()
    except expected:
        return
    except Exception as error:  # noqa: BLE001 - the wrong exception is a failure, with its name
        pytest.fail(f"{what} must raise {expected.__name__}, not {type(error).__name__}: {error}")
    pytest.fail(f"{what} must raise {expected.__name__}")


def must_raise_value_error(call, what):
    """``call()`` must raise ValueError; anything else fails naming ``what``."""
    must_raise(ValueError, call, what)


def projection_weights(module: torch.nn.Module) -> dict:
    """``{name: (weight, bias)}`` of ``module``'s four projections; a missing bias is zeros (checked on its own)."""
    weights = {}
    for name in PROJECTIONS:
        layer = getattr(module, name)
        bias = layer.bias if layer.bias is not None else torch.zeros(layer.weight.shape[0])
        weights[name] = (layer.weight, bias)
    return weights


def torch_twin(weights: dict, d_model: int, num_heads: int) -> torch.nn.MultiheadAttention:
    """PyTorch's own ``nn.MultiheadAttention`` carrying the four projections ``weights`` (``{name: (weight,
    bias)}``, as :func:`projection_weights` gives them): whatever holds them, both compute the same thing."""
    twin = torch.nn.MultiheadAttention(d_model, num_heads, batch_first=True)
    with torch.no_grad():
        twin.in_proj_weight.copy_(torch.cat([weights[name][0] for name in PROJECTIONS[:3]]))
        twin.in_proj_bias.copy_(torch.cat([weights[name][1] for name in PROJECTIONS[:3]]))
        twin.out_proj.weight.copy_(weights["out_proj"][0])
        twin.out_proj.bias.copy_(weights["out_proj"][1])
    return twin.eval()
