"""Data-dependent `if` whose branches assign the same name (docs: Common Graph Breaks)."""
import torch


def fn(x):
    y = x.sum()
    if y > 0:  # BREAK
        z = x * 2
    else:
        z = -x
    return z + 1


def target():
    torch.manual_seed(0)
    return [(fn, (torch.randn(3, 3),), {})]


EXPECT = 'rewrite'
