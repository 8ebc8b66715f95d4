import torch


def inner1(x):
    x = x + 1
    torch._dynamo.graph_break()  # BREAK
    return x + 2


def inner2(x):
    x = x + 4
    return inner1(x) + 8


def f(x):
    x = x + 16
    return inner2(x) + 32


def target():
    return f, (torch.randn(4),), {}
