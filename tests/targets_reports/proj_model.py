"""A project file that reaches one library line (fakelib.helper's break) from two places."""
import fakelib
import torch


def f(x):
    x = fakelib.helper(x)  # OWNER_A
    x = x * 2
    x = fakelib.helper(x)  # OWNER_B
    return x - 1


def target():
    return f, (torch.randn(4),), {}
