"""`float(t)` of a loss term used as a weight (adapted from training-loop code)."""
import torch


def weighted(pred, tgt):
    err = (pred - tgt).abs()
    w = float(err.max())  # BREAK
    return err / (w + 1.0)


def target():
    torch.manual_seed(0)
    return [(weighted, (torch.randn(4, 6), torch.randn(4, 6)), {})]


EXPECT = 'rewrite'
