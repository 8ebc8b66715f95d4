"""Symmetric, but the collectives break the graph: one is in a disabled function, one
(dist.broadcast) is not traceable on torch 2.13."""
import torch
import torch.distributed as dist


@torch._dynamo.disable
def sync(y):
    dist.all_reduce(y)


def step(x):
    y = torch.sin(x)
    sync(y)  # DISABLED_SYNC
    dist.broadcast(y, 0)  # BROADCAST
    return y + 1


def make():
    return (step, (torch.ones(4),), {})
