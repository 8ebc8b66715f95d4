"""Rank 1 prints inside the compiled function: its graphs split there, rank 0's do not."""
import torch
import torch.distributed as dist


def step(x):
    y = torch.sin(x) * 2
    if dist.get_rank() == 1:
        print("rank 1 says hi")  # RANK1_PRINT
    dist.all_reduce(y)
    return y + 1


def make():
    return (step, (torch.ones(4),), {})
