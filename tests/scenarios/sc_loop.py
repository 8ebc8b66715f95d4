import torch


def f(x):
    for i in range(3):
        x = x + i
        print("iteration", i)  # BREAK
    return x


def target():
    return f, (torch.randn(4),), {}
