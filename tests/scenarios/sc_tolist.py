import torch


def f(x):
    vals = x.tolist()  # BREAK
    return x + len(vals)


def target():
    return f, (torch.arange(4),), {}
