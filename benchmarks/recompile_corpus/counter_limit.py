"""A call counter kept in a module attribute, called more often than recompile_limit (8)."""
import torch
from torch import nn

EXPECT = "fixed"


class Scheduled(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        self.calls += 1
        return self.lin(x) * self.calls


def target():
    torch.manual_seed(0)
    m = Scheduled().eval()
    return [(m, (torch.randn(2, 4),), {}) for _ in range(11)]
