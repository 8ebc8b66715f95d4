"""The same model in train mode, then in eval mode (a validation pass)."""
import copy

import torch
from torch import nn

EXPECT = "expected"


def run(model, x):
    return model(x)


def target():
    torch.manual_seed(0)
    train = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    val = copy.deepcopy(train).eval()
    return [(run, (train, torch.randn(3, 4)), {}), (run, (val, torch.randn(3, 4)), {})]
