"""A small model whose two breaks' eager gaps differ 3x: two helpers Dynamo does not trace
(torch.compiler.disable), a Python loop of 30k and of 10k steps."""
import torch
from torch import nn


@torch.compiler.disable
def busy(n):
    s = 0
    for i in range(n):
        s += i
    return s


class Model(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.a, self.b, self.c = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, x):
        x = self.a(x).relu()
        busy(30000)   # the slow gap: 3x the other
        x = self.b(x).relu()
        busy(10000)   # the fast gap
        return self.c(x)


def target():
    torch.manual_seed(0)
    return Model().eval(), (torch.randn(8, 64),), {}
