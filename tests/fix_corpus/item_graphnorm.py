"""GraphNorm-style scale from `.item()` (adapted from PyG/graph-norm code): the scale feeds only tensor math."""
import math

import torch


class GraphNormLite(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.linspace(0.5, 1.5, dim))
        self.eps = 1e-5

    def forward(self, x):
        out = x - x.mean(dim=0, keepdim=True)
        var = (out * out).mean().item()  # BREAK
        # normalise by the global std
        return self.weight * out / math.sqrt(var + self.eps)


def target():
    torch.manual_seed(0)
    return [(GraphNormLite(8), (torch.randn(16, 8),), {})]


EXPECT = 'rewrite'
