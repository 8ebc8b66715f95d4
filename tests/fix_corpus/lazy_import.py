"""A lazy import inside a forward (optional-dependency pattern in libraries)."""
import torch


def fn(x):
    import scipy.special
    return x * scipy.special.expit(0.0)  # BREAK


def target():
    torch.manual_seed(0)
    return [(fn, (torch.randn(3),), {})]


EXPECT = "rewrite"  # scipy.special.expit -> torch.special.expit on float64 (hoisting the import alone is refused)
