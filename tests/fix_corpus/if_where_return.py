"""Data-dependent `if` returning from both branches (docs: the `torch.cond` example)."""
import torch


def fn(x):
    if x.sum() > 0:  # BREAK
        return x + 1
    return x - 1


def target():
    torch.manual_seed(0)
    return [(fn, (torch.ones(3, 3),), {}), (fn, (-torch.ones(3, 3),), {})]


EXPECT = 'rewrite'
