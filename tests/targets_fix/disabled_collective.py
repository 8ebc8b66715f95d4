"""A collective hidden from Dynamo behind `@torch._dynamo.disable`, called once per layer
(the seeds' headline break: one graph break per layer and call). In torch 2.13 the body
traces (dist.all_reduce becomes a functional collective), so the hatch is not needed."""
import os
import tempfile

import torch
import torch.distributed as dist
from torch import nn


@torch._dynamo.disable
def reduce_from_tp(t):
    dist.all_reduce(t)
    return t


class ParallelBlock(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        y = reduce_from_tp(self.fc(x))  # CALL
        return torch.relu(y) + x


class Stack(nn.Module):
    def __init__(self, d=8, depth=3):
        super().__init__()
        self.blocks = nn.ModuleList([ParallelBlock(d) for _ in range(depth)])

    def forward(self, x):
        for blk in self.blocks:
            x = blk(x)
        return x


def target():
    if not dist.is_initialized():
        store = dist.FileStore(os.path.join(tempfile.mkdtemp(), "store"), 1)
        dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    torch.manual_seed(0)
    return [(Stack(), (torch.randn(2, 8),), {})]
