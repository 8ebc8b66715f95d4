import torch
from torch import nn


class Shout(nn.Module):
    def forward(self, x):
        print("shape", tuple(x.shape))  # BREAK
        return x + 1


def target():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), Shout(), nn.ReLU())
    return model, (torch.randn(2, 4),), {}
