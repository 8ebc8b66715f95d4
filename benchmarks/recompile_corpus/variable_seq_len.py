"""Token batches padded to their own longest sequence: the length changes every batch."""
import torch
from torch import nn

EXPECT = "fixed"


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 16)
        self.proj = nn.Linear(16, 16)

    def forward(self, ids):
        return self.proj(self.emb(ids)).mean(1)


def target():
    torch.manual_seed(0)
    m = Encoder().eval()
    return [(m, (torch.randint(0, 100, (4, n)),), {}) for n in (7, 12, 9, 15)]
