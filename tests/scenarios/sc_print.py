import torch


def f(x):
    x = x * 2
    print("step")  # BREAK
    return x + 1


def target():
    return f, (torch.randn(4),), {}
