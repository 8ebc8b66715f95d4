"""One compiled driver handed two different helper functions (a callback argument)."""
import torch

EXPECT = "expected"


def apply(op, x):
    return op(x) + 1


def double(x):
    return x * 2


def triple(x):
    return x * 3


def target():
    torch.manual_seed(0)
    return [(apply, (h, torch.randn(4)), {}) for h in (double, triple, double)]
