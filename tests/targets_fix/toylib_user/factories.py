"""A maintainer's factories, outside the library checkout (the checkout is on PYTHONPATH)."""
import torch
from toylib.layers import Gate, SparseMoe


def gate():
    torch.manual_seed(0)
    return [(Gate(), (torch.randn(4, 8),), {})]


def moe():
    torch.manual_seed(0)
    return [(SparseMoe(), (torch.randn(6, 8),), {})]


def gate_wide():
    torch.manual_seed(1)
    return [(Gate(), (torch.randn(16, 8),), {})]


def positives():
    from toylib.layers import Positives
    torch.manual_seed(0)
    return [(Positives(), (torch.randn(6, 8),), {})]
