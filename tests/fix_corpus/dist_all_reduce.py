"""In-place `dist.all_reduce` in a forward (the field study's headline break)."""
import os
import tempfile

import torch
import torch.distributed as dist


def sync_mean(x):
    y = x * 2
    dist.all_reduce(y)  # NO BREAK in torch 2.13 (control: no site expected)
    return y / dist.get_world_size()


def target():
    if not dist.is_initialized():
        store = dist.FileStore(os.path.join(tempfile.mkdtemp(), "store"), 1)
        dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    torch.manual_seed(0)
    return [(sync_mean, (torch.randn(4),), {})]


EXPECT = 'none: no break in torch 2.13 (dist.all_reduce traces into functional collectives); a control'
