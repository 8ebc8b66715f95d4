"""A wall-clock timer context around a block (profiling helpers in training code)."""
import time

import torch

TIMES = []


class Timer:
    def __init__(self, name):
        self.name = name

    def __enter__(self):
        self.t0 = time.perf_counter()  # BREAK
        return self

    def __exit__(self, *exc):
        TIMES.append((self.name, time.perf_counter() - self.t0))


def block(x):
    with Timer("mlp"):
        y = (x @ x.T).relu()
    return y.sum(-1)


def target():
    torch.manual_seed(0)
    return [(block, (torch.randn(4, 3),), {})]


EXPECT = 'caller: the wall-clock timer runs eagerly around the compiled part (entry-split); no rewrite can keep a host clock'
