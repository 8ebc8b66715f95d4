"""`ids.tolist()` used to index an embedding table."""
import torch


def lookup(table, ids):
    idx = ids.tolist()  # BREAK
    return table[idx].sum(0)


def target():
    torch.manual_seed(0)
    return [(lookup, (torch.randn(10, 4), torch.tensor([1, 4, 4, 7])), {})]


EXPECT = 'rewrite'
