"""A statement reading a name the function binds only later, on a path that does not run
(as transformers' mask preparation reads `causal_mask` in a branch before assigning it)."""
import torch


def masked_total(x, mask=None):
    total = x[x > 0].sum() if mask is None else x[causal].sum()  # noqa: F821  # LATE
    causal = x > 1
    return total + causal.sum()


def target():
    torch.manual_seed(0)
    return [(masked_total, (torch.randn(16),), {})]
