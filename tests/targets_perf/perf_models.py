"""Small real models for the perf tests: an MLP, and 4 identical blocks in an nn.ModuleList."""

import torch
from torch import nn

from graphstitch.demo import DemoModel


class Stack(DemoModel):
    """The demo's layers, 4 blocks deep, without its breaks."""

    def __init__(self, d=32, depth=4):
        super().__init__(d, depth)

    def forward(self, x):
        h = self.inp(x)
        for b in self.blocks:
            h = b(h)
        return self.out(h)


class BreakyStack(Stack):
    def forward(self, x):
        h = self.inp(x)
        print("stack")                     # PERF_BREAK
        for b in self.blocks:
            h = b(h)
        return self.out(h)


def mlp():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8)).eval()
    return model, (torch.randn(4, 16),), {}


def stack():
    torch.manual_seed(0)
    return Stack().eval(), (torch.randn(8, 32),), {}


def breaky_stack():
    torch.manual_seed(0)
    return BreakyStack().eval(), (torch.randn(8, 32),), {}


def plain_function():
    return (lambda x: x + 1), (torch.ones(2),), {}


def fails_eagerly():
    def f(x):
        raise ValueError("boom")    # PERF_FAIL
    return f, (torch.ones(2),), {}
