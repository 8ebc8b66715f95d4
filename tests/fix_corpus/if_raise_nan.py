"""`if cond: raise` on tensor data: a NaN guard (adapted from training-loop sanity checks)."""
import torch


def step(x, w):
    y = x @ w
    if torch.isnan(y).any():  # BREAK
        raise ValueError("NaN in activations")
    return y.relu()


def target():
    torch.manual_seed(0)
    return [(step, (torch.randn(4, 3), torch.randn(3, 2)), {})]


EXPECT = 'rewrite'
