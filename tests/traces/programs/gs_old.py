# A small program for writing TORCH_TRACE logs with old torch versions (tests/traces/).
import sys
import torch


def helper(x):
    print("inner")  # OLD_NESTED
    return x * 2


def middle(x):
    return helper(x) + 1


@torch.compile(backend="eager")
def f(x):
    y = x.sin()
    print("step")  # OLD_PRINT
    y = middle(y)
    if y.sum() > 0:  # OLD_DATADEP
        return y.cos()
    return y.tan()


if __name__ == "__main__":
    for n in (2, 3, 4):
        f(torch.ones(n, 4))
