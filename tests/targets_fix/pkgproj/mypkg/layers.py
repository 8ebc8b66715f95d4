import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        y = self.fc(x)
        print("block out", y.shape)  # PRINT
        return torch.relu(y) + x
