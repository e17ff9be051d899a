"""A call can report which of its arguments it changed in place, so a hidden test can check a docstring's "inputs
are left unchanged by every call": the worker compares each argument with a copy it took before the call (only
when asked), and the judge takes the answer as data, checked like every other reply field."""

import math

import pytest
import torch

from autograder.worker.session import run_call

NAN = float("nan")

# ------------------------------------------------------------------ the worker's watch, in this process


def _changed(function, *args, **kwargs):
    reply = run_call(function, list(args), kwargs, report_changes=True)
    assert set(reply) == {"value", "changed"}
    return reply["changed"]


@pytest.mark.parametrize("function, args, kwargs, expected", [
    (lambda x, s: x.mul_(s), (torch.ones(3), 2.0), {}, ["arg0"]),
    (lambda x, y: y.div_(2), (torch.ones(2), torch.ones(2)), {}, ["arg1"]),
    (lambda x, mask=None: mask.logical_not_(), (torch.ones(2),), {"mask": torch.tensor([True, False])}, ["mask"]),
    (lambda x: x.nan_to_num_(), (torch.tensor([NAN, 1.0]),), {}, ["arg0"]),  # a NaN that became a number
    (lambda x: x.fill_(NAN), (torch.zeros(2),), {}, ["arg0"]),  # a number that became NaN
    (lambda x: x.resize_(2), (torch.zeros(2, 2),), {}, ["arg0"]),  # an in-place resize: the shape
    (lambda x: x.t_(), (torch.eye(3),), {}, ["arg0"]),  # symmetric, same shape: only the strides tell
    (lambda x: x.as_strided_((2,), (1,), 1), (torch.zeros(3),), {}, ["arg0"]),  # same values, another offset
    (lambda xs: xs[1].add_(1), ([torch.zeros(1), torch.zeros(1)],), {}, ["arg0"]),  # a tensor inside a list
    (lambda xs: xs.append(torch.zeros(1)), ([torch.zeros(1)],), {}, ["arg0"]),  # the list itself
    (lambda xs: xs.__setitem__(0, torch.zeros(1)), ([torch.zeros(1)],), {}, ["arg0"]),  # an equal tensor swapped in
    (lambda xs: xs.append(xs), ([torch.zeros(1)],), {}, ["arg0"]),  # made to contain itself: still answered
    (lambda xs: xs.extend([xs] * 50), ([torch.zeros(1)],), {}, ["arg0"]),  # and 50 times: 50 ** 32 paths
])
def test_the_watch_sees_every_kind_of_change(function, args, kwargs, expected):
    assert _changed(function, *args, **kwargs) == expected


@pytest.mark.parametrize("function, args", [
    (lambda x: x + 1, (torch.tensor([NAN, 1.0, math.inf]),)),  # NaN stays NaN: torch.equal would call it changed
    (lambda x: x.add_(0), (torch.tensor([NAN, -math.inf]),)),  # written to, values as they were
    (lambda x, n: x.view(n, -1), (torch.arange(6), 2)),
    (lambda x: x.transpose(0, 1).contiguous(), (torch.zeros(2, 3, dtype=torch.bool),)),
    (lambda xs: xs[0] * 2, ([torch.zeros(2, dtype=torch.complex64), (torch.ones(1),)],)),
    (lambda x: x, (torch.empty(0, 4),)),
])
def test_the_watch_reports_nothing_when_the_inputs_are_left_alone(function, args):
    assert _changed(function, *args) == []


def test_an_ordinary_call_returns_its_value_and_copies_nothing():
    x = torch.ones(2)
    assert run_call(lambda t: t.mul_(3), [x], {}) is x and torch.equal(x, torch.full((2,), 3.0))
