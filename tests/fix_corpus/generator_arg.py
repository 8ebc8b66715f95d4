"""A generator passed into the compiled function (the caller builds it lazily)."""
import torch


def accumulate(parts):
    total = 0
    for p in parts:  # BREAK
        total = total + p.sin()
    return total


def target():
    torch.manual_seed(0)
    xs = [torch.randn(3) for _ in range(4)]
    return [(accumulate, ((x * 2 for x in xs),), {})]


EXPECT = 'caller'
