"""A fresh closure per call capturing a Python float (functools.partial-style helpers)."""
import torch

EXPECT = "fixed"


def make_scaler(scale):
    def scaled(x):
        return x * scale
    return scaled


def target():
    torch.manual_seed(0)
    return [(make_scaler(s), (torch.randn(6),), {}) for s in (0.5, 1.5, 2.5)]
