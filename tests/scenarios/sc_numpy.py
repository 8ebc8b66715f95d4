import torch


def f(x):
    y = x * 3
    # numpy on a traced tensor is itself traced (torch._numpy), but turning its result into
    # a Python float is data-dependent.
    z = y.numpy().mean()
    return y + float(z)  # BREAK


def target():
    return f, (torch.randn(4),), {}
