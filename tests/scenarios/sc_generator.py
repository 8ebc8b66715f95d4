import torch


def steps(x):
    yield x + 1
    yield x * 2


def f(parts):
    return sum(parts)  # BREAK


def target():
    # A generator object handed to the compiled function (it cannot be copied, so the eager
    # reference run is skipped for it).
    return f, (steps(torch.randn(4)),), {}
