import os
import tempfile

import torch

PATH = os.path.join(tempfile.gettempdir(), f"graphstitch-scenario-{os.getpid()}.pt")


def f(x):
    y = x * 2
    torch.save(y, PATH)  # BREAK
    return y + 1


def target():
    return f, (torch.randn(4),), {}
