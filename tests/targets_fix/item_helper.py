"""`.item()` in a helper (GB0124): capture_scalar_outputs removes it."""
import torch


def normalize(h):
    scale = h.abs().mean().item()  # ITEM
    return h / (scale + 1e-6)


def model(x):
    h = torch.tanh(x) * 2
    h = normalize(h)  # CALL
    return h.relu()


def factory():
    torch.manual_seed(0)
    return [(model, (torch.randn(4, 8),), {}), (model, (torch.randn(4, 8),), {})]
