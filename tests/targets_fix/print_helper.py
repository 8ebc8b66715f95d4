"""print of a tensor in a helper (GB0059): reorderable_logging_functions keeps the
print and removes the break; allow_in_graph removes the break but loses the print."""
import torch


def show(h):
    print("hidden", h)  # PRINT
    return h * 2


def model(x):
    h = x.tanh()
    h = show(h)  # CALL
    return h + 1


def factory():
    torch.manual_seed(0)
    return [(model, (torch.randn(2, 3),), {}), (model, (torch.randn(2, 3),), {})]
