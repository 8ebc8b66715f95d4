"""In-place `dist.broadcast` of a buffer from rank 0."""
import os
import tempfile

import torch
import torch.distributed as dist


def share(x):
    z = x + 1
    dist.broadcast(z, src=0)  # BREAK
    return z.cos()


def target():
    if not dist.is_initialized():
        store = dist.FileStore(os.path.join(tempfile.mkdtemp(), "store"), 1)
        dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    torch.manual_seed(0)
    return [(share, (torch.randn(4),), {})]


EXPECT = 'rewrite'
