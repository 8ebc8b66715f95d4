import random
import time

import torch


def step(x):
    torch.manual_seed(0)  # SEED
    t0 = time.perf_counter()  # CLOCK
    noise = random.random()  # DRAW
    return x.sin() * noise + (time.perf_counter() - t0) * 0


def target():
    return step, (torch.randn(4),), {}
