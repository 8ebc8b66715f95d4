"""A list iterator passed into the compiled function (docs: unsupported `list_iterator` input)."""
import torch


def consume(it):
    a = next(it)  # BREAK
    b = next(it)
    return a * b


def target():
    torch.manual_seed(0)
    xs = [torch.randn(3), torch.randn(3)]
    return [(consume, (iter(xs),), {})]


EXPECT = 'caller'
