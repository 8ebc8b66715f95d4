import torch
from torch import nn


def target():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 2)).eval()
    return [(model, (torch.randn(4, 8),), {}), (model, (torch.randn(4, 8),), {})]
