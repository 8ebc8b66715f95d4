"""Rank 1 dies of a segfault inside the compiled function (no Python error to record)."""
import ctypes

import torch
import torch.distributed as dist


def step(x):
    y = torch.sin(x)
    if dist.get_rank() == 1:
        ctypes.string_at(0)  # RANK1_SEGV
    return y + 1


def make():
    return (step, (torch.ones(4),), {})
