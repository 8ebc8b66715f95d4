"""Features first from a frozen input, then from one that requires grad (fine-tuning)."""
import torch

EXPECT = "expected"


def feats(x):
    return (x * 2).tanh()


def target():
    torch.manual_seed(0)
    return [(feats, (torch.randn(5),), {}), (feats, (torch.randn(5).requires_grad_(),), {})]
