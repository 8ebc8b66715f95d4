from torch import nn

from .layers import Block


class TinyClassifier(nn.Module):
    def __init__(self, d=16, classes=3):
        super().__init__()
        self.blocks = nn.ModuleList([Block(d) for _ in range(2)])
        self.head = nn.Linear(d, classes)
        self.eps = 1e-5

    def forward(self, x):
        h = x
        for blk in self.blocks:
            h = blk(h)  # LOOP
        scale = h.abs().mean().item()  # ITEM
        return self.head(h / (scale + self.eps))
