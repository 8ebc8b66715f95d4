"""Guard-stability targets for `graphstitch guards`."""
import torch
from torch import nn


def stable(x):
    return x.sin() + 1


def make_stable():
    return (stable, (torch.randn(4, 3),), {})


class Counter(nn.Module):
    """Counts its calls in a Python int attribute: every call changes a guarded value."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1  # CALLS
        return x * self.calls  # COUNTER


def make_counter():
    return (Counter(), (torch.randn(4),), {})


def reduce_rows(x, scale):
    return (x * scale).sum(dim=0)  # REDUCE


def make_reduce():
    return (reduce_rows, (torch.randn(4, 3), torch.ones(3)), {})


def make_scaler(scale):
    def scaled(x):
        return x * scale  # SCALED
    return scaled


def make_closures():
    """A factory of closures: one code object, two function objects, one shared cache."""
    return [(make_scaler(s), (torch.randn(3),), {}) for s in (2, 3)]


def make_batches():
    """Three batch sizes from the factory: one recompile in the first pass, then dynamic."""
    return [(reduce_rows, (torch.randn(n, 3), torch.ones(3)), {}) for n in (4, 6, 8)]
