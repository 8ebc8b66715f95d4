"""Sweep targets: a user module with several factories (one of each row status).

GS_SWEEP_EXTRA=1 plants a regression: `clean` gets a print break."""
import os

import torch

__all__ = ["clean", "breaking", "cannot_build", "eager_bug"]


def _clean_body(x):
    y = torch.relu(x) * 2
    if os.environ.get("GS_SWEEP_EXTRA") == "1":
        print("extra")  # EXTRA
    return y + 1


def _breaking_body(x):
    y = x * 2
    s = y.sum().item()  # ITEM
    return y + s


def _buggy_body(x):
    return x @ torch.ones(5, 5)  # shapes do not fit: fails eagerly too


def clean():
    return (_clean_body, (torch.randn(4, 3),), {})


def breaking():
    return (_breaking_body, (torch.randn(4, 3),), {})


def cannot_build():
    raise RuntimeError("needs a checkpoint we do not have")


def eager_bug():
    return (_buggy_body, (torch.randn(4, 3),), {})


def helper(x):  # takes an argument: not a factory (and not in __all__ anyway)
    return x
