"""CI-report target: one print break and one recompile cause (batch size changes)."""
import torch


def body(x):  # BODY
    y = x.relu()
    print("hi")  # PRINT
    return y * 2


def factory():
    return [(body, (torch.randn(b, 3),), {}) for b in (2, 3)]
