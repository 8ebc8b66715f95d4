"""Gate target: one .item() break; BREAKS env var adds a print break (a regression)."""
import os

import torch


def body(x):
    y = x * 2
    s = y.sum().item()  # ITEM
    if os.environ.get("GS_GATE_EXTRA") == "1":
        print("extra")  # PRINT
    return y + s


def factory():
    return (body, (torch.randn(4),), {})
