"""Layers with and without a bias passed to one compiled function (a None parameter)."""
import torch
from torch import nn

EXPECT = "expected"


def apply(layer, x):
    return layer(x).relu()


def target():
    torch.manual_seed(0)
    return [(apply, (nn.Linear(4, 4, bias=b), torch.randn(2, 4)), {}) for b in (True, False, True)]
