"""Rank 1 raises before the collective; rank 0 waits in it until the launcher stops it."""
import torch
import torch.distributed as dist


def step(x):
    y = torch.sin(x)
    if dist.get_rank() == 1:
        raise RuntimeError("rank 1 cannot go on")  # RANK1_RAISE
    dist.all_reduce(y)
    return y + 1


def make():
    return (step, (torch.ones(4),), {})
