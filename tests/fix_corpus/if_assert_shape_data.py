"""`assert` on tensor data (input validation in library code)."""
import torch


def softmax_probs(p):
    assert (p >= 0).all(), "probabilities must be non-negative"  # NO BREAK in torch 2.13 (control: no site expected)
    return p / p.sum(-1, keepdim=True)


def target():
    torch.manual_seed(0)
    return [(softmax_probs, (torch.rand(3, 4),), {})]


EXPECT = 'none: no break in torch 2.13 (assert on tensor data is traced); a control'
