"""Rank 1 compiles `step`, then hangs in `wait`; rank 0 finishes."""
import time

import torch
import torch.distributed as dist


def step(x):
    return torch.sin(x) + 1


def wait(x):
    if dist.get_rank() == 1:
        time.sleep(3600)  # RANK1_HANG
    return x * 2


def make():
    return [(step, (torch.ones(4),), {}), (wait, (torch.ones(4),), {})]
