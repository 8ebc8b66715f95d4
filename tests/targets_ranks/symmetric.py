"""Both ranks compile the same graphs and enter the same collectives. `sync_step`'s
collectives break the graph on every rank (symmetric, but flagged): one runs in a disabled
function, one (dist.broadcast) is not traceable on torch 2.13."""
import torch
import torch.distributed as dist


def step(x):
    y = torch.sin(x) * 2
    dist.all_reduce(y)  # traced: a functional collective in the graph
    return y + 1


@torch._dynamo.disable
def sync(y):
    dist.all_reduce(y)


def sync_step(x):
    y = torch.sin(x)
    sync(y)  # DISABLED_SYNC
    dist.broadcast(y, 0)  # BROADCAST
    return y + 1


def make():
    x = torch.ones(4)
    return [(step, (x,), {}), (step, (x * 2,), {}), (sync_step, (x,), {})]
