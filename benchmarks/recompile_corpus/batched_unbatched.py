"""A layer called on an unbatched input, then on a batched one (another number of dims)."""
import torch
from torch import nn

EXPECT = "expected"


def target():
    torch.manual_seed(0)
    m = nn.Linear(6, 3)
    return [(m, (torch.randn(6),), {}), (m, (torch.randn(2, 6),), {})]
