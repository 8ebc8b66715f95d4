"""`copy.deepcopy` of a tensor inside the compiled code (EMA/teacher snapshots)."""
import copy

import torch


def snapshot(x):
    y = copy.deepcopy(x)  # BREAK
    x.add_(1)
    return x * y


def target():
    torch.manual_seed(0)
    return [(snapshot, (torch.randn(4),), {})]


EXPECT = 'rewrite'
