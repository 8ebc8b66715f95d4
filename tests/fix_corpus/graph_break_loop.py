"""An explicit graph break inside a loop (docs: Skipped Functions, GB7000)."""
import torch


def fn(x):
    for i in range(5):
        x = x + 1
        if i == 3:
            torch._dynamo.graph_break()  # BREAK
    return x


def target():
    return [(fn, (torch.randn(3),), {})]


EXPECT = 'rewrite'
