"""`while` on tensor data: halve until the norm is small (iterative solvers)."""
import torch


def shrink(x):
    while x.norm() > 1:  # BREAK
        x = x / 2
    return x


def target():
    torch.manual_seed(0)
    return [(shrink, (torch.randn(6) * 4,), {})]


EXPECT = 'extract'
