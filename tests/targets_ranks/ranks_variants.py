"""One function whose path depends on an argument, as code that depends on the rank would."""
import torch


def step(x, loud, loop):
    y = torch.sin(x)
    if loud:
        print("loud")  # LOUD_PRINT
    if loop:
        for _ in range(2):
            print("looping")  # LOOP_PRINT
    return y + 1
