"""Adam-style bias correction driven by an integer step attribute of the module."""
import torch
from torch import nn

EXPECT = "fixed"


class EMA(nn.Module):
    def __init__(self):
        super().__init__()
        self.step = 0

    def forward(self, x):
        self.step += 1
        return x / (1 - 0.9 ** self.step)


def target():
    torch.manual_seed(0)
    m = EMA()
    return [(m, (torch.randn(8),), {}) for _ in range(5)]
