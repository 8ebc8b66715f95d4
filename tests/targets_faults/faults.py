"""Targets that stop early or fail to compile: never a clean census (tests/test_trust.py)."""
import os
import sys

import torch


def exit_in_factory():
    sys.exit(0)  # FACTORY_EXIT


def exit_in_call():
    def step(x):
        y = x.cos()
        sys.exit(2)  # CALL_EXIT
        return y
    return [(step, (torch.randn(3),), {})]


def hard_exit_in_call():
    def step(x):
        os._exit(0)  # HARD_EXIT
    return [(step, (torch.randn(3),), {})]


@torch.library.custom_op("gsfaults::scale", mutates_args=())
def scale(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@scale.register_fake
def _(x):
    # Fails only under compile (fake tensors), with an enormous message, like a FakeTensor repr.
    raise RuntimeError("fake kernel refused " + "FakeTensor(..., size=(3,)) " * 400)


def compile_only_failure():
    def step(x):
        return scale(x) + 1  # COMPILE_FAIL
    return [(step, (torch.randn(3),), {})]


def _step_then_scale(x):
    h = x.sin() * 2
    n = int(h.abs().argmax())  # BREAK_BEFORE_FAIL
    y = scale(h[n:])           # traced in the resume function: its fake kernel raises
    return y.sum() + h.mean()


def compile_fails_after_break():
    torch.manual_seed(0)   # every trial's process makes the same input (the slice length depends on it)
    return [(_step_then_scale, (torch.randn(8),), {})]


def clean():
    def step(x):
        return x.sin() * 2
    return [(step, (torch.randn(3),), {})]
