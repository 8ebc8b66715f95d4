import threading

import torch

lock = threading.Lock()


def f(x):
    y = x * 2
    with lock:  # BREAK
        y = y + 1
    return y


def target():
    return f, (torch.randn(4),), {}
