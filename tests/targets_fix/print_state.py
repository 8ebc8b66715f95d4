"""print in a helper that reads Python state set by its caller (GB0059).

allow_in_graph bakes the state read at trace time (no guard inside it) and drops the print at
run time; reorderable_logging_functions keeps both.
"""
import torch

STATE = {"n": 1}


def scaled(x):
    print("scale", STATE["n"])  # PRINT
    return x * STATE["n"]


def step(x, n):
    STATE["n"] = n
    return scaled(x + 1).cos()


def factory():
    torch.manual_seed(0)
    return [(step, (torch.randn(4), n), {}) for n in (1, 2, 3)]
