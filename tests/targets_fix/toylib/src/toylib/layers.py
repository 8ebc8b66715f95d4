"""A library's own layers, written as libraries write them: a decorator around ``forward``
(``functools.wraps``, as transformers' ``@can_return_tuple``), a condition spanning lines, and
MoE routing over the experts a batch hits (as Mixtral's sparse block)."""
import functools

import torch
import torch.nn.functional as F
from torch import nn


def returns_tuple(fn):
    @functools.wraps(fn)
    def wrapper(self, *args, **kwargs):
        out = fn(self, *args, **kwargs)
        return out if isinstance(out, tuple) else (out,)
    return wrapper


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    @returns_tuple
    def forward(self, x):
        h = self.proj(x)
        if (h.shape[-1] > 4
                and h.mean().item() > 0):  # ITEM
            h = h / 100
        return h.relu()


class SparseMoe(nn.Module):
    def __init__(self, dim=8, n=4, k=2):
        super().__init__()
        self.n, self.k = n, k
        self.gate = nn.Linear(dim, n, bias=False)
        self.experts = nn.ModuleList(nn.Linear(dim, dim) for _ in range(n))

    def forward(self, x):
        w, sel = torch.topk(F.softmax(self.gate(x), dim=-1), self.k, dim=-1)
        out = torch.zeros_like(x)
        mask = F.one_hot(sel, num_classes=self.n).permute(2, 1, 0)
        hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero()  # HIT
        for e in hit:
            slot, tok = torch.where(mask[e].squeeze(0))  # WHERE
            out.index_add_(0, tok, self.experts[e](x[tok]) * w[tok, slot, None])
        return out


class Positives(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    @returns_tuple
    def forward(self, x):
        h = self.proj(x)
        keep = h[h.sum(-1) > 0]  # KEEP
        return keep.mean(0) + h.mean(0)
