"""Mixup with a numpy Beta draw (adapted from timm/mixup-style augmentation)."""
import numpy as np
import torch


def mixup(x, alpha):
    lam = np.random.beta(alpha, alpha)  # BREAK
    perm = torch.arange(x.shape[0] - 1, -1, -1)
    return lam * x + (1 - lam) * x[perm]


def target():
    np.random.seed(0)
    torch.manual_seed(0)
    return [(mixup, (torch.randn(4, 3), 0.4), {})]


EXPECT = (
    "caller: numpy's random stream cannot be rewritten (no torch draw equals it), so the draw runs eagerly between"
    " compiled parts (entry-split; the verifier seeds numpy before each call)"
)
