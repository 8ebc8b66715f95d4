"""Several kinds of breaks and a recompile; usable as a factory target and as a script."""
import sys

import torch


def helper(x):
    print("inner")  # TR_NESTED
    return x * 2


def step(x):
    y = x.sin()
    print("step")  # TR_PRINT
    y = helper(y) + 1
    if y.sum() > 0:  # TR_DATADEP
        y = y.cos()
    return y - 1


def calls():
    torch.manual_seed(0)
    return [(step, (torch.randn(2, 3),), {}), (step, (torch.randn(3, 3),), {}),
            (step, (torch.randn(4, 3),), {})]


if __name__ == "__main__":
    torch.manual_seed(0)  # which side of the data-dependent branch runs decides what recompiles
    f = torch.compile(step, backend="eager")
    for n in (2, 3, 4):
        f(torch.randn(n, 3))
    code = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    print(f"script done argv={sys.argv[1:]}")
    if code == 99:
        raise RuntimeError("boom")  # TR_CRASH
    sys.exit(code)
