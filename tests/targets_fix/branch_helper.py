"""Data-dependent `if` in a helper (GB0170): nonstrict_trace moves the break, not removes it."""
import torch


def gate(h):
    if h.sum() > 0:  # BRANCH
        return h.relu()
    return -h


def model(x):
    h = x * 2 + 1
    h = gate(h)  # CALL
    return h.sin()


def factory():
    torch.manual_seed(0)
    return [(model, (torch.randn(4, 8),), {}), (model, (torch.randn(4, 8),), {})]
