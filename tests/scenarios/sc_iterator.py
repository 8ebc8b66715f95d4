import torch


def f(xs):
    total = next(xs)  # BREAK
    for x in xs:  # LOOP
        total = total + x
    return total


def target():
    return f, (iter([torch.randn(3) for _ in range(3)]),), {}
