"""Boolean-mask edge filtering before a scatter (adapted from PyG's dropout_edge/subgraph)."""
import torch


def propagate(x, edge_index, keep):
    ei = edge_index[:, keep]  # BREAK
    out = torch.zeros_like(x)
    return out.index_add(0, ei[1], x[ei[0]])


def target():
    torch.manual_seed(0)
    ei = torch.randint(0, 5, (2, 12))
    keep = torch.rand(12) > 0.3
    return [(propagate, (torch.randn(5, 3), ei, keep), {})]


EXPECT = 'config'
