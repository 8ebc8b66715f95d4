"""Padding-mask branch in attention (adapted from transformers' eager attention paths)."""
import torch


class Attn(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.q = torch.nn.Linear(d, d)
        self.k = torch.nn.Linear(d, d)

    def forward(self, x, mask):
        scores = self.q(x) @ self.k(x).transpose(-1, -2)
        if (mask == 0).any():  # BREAK
            scores = scores.masked_fill(mask[:, None, :] == 0, -1e9)
        return scores.softmax(-1)


def target():
    torch.manual_seed(0)
    mask = torch.ones(2, 5)
    mask[1, 3:] = 0
    return [(Attn(8), (torch.randn(2, 5, 8), mask), {})]


EXPECT = 'rewrite'
