"""Gate target: GS_LOOP=1 puts a print inside a loop, so Dynamo skips the whole frame."""
import os

import torch


def looped(x):
    if os.environ.get("GS_LOOP") == "1":
        for _ in range(2):
            print("step")  # LOOP
            x = x + 1
    return x * 2


def factory():
    return (looped, (torch.randn(3),), {})
