"""`int(mask.sum())` as a divisor for a masked mean (adapted from masked-loss code)."""
import torch


def masked_mean(x, mask):
    total = (x * mask).sum()
    n = int(mask.sum())  # BREAK
    return total / max(n, 1)


def target():
    torch.manual_seed(0)
    mask = torch.tensor([[1.0, 0.0, 1.0], [1.0, 1.0, 0.0]])
    return [(masked_mean, (torch.randn(2, 3), mask), {})]


EXPECT = 'rewrite'
