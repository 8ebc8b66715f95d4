"""Two breaks; the eager code of the second is deliberately slow (a sleep Dynamo cannot trace)."""
import time

import torch


def f(x):
    x = x + 1
    torch._dynamo.graph_break()  # FAST_BREAK
    x = x * 2
    time.sleep(0.01)  # SLOW_BREAK
    return x - 1


def target():
    return f, (torch.randn(8),), {}
