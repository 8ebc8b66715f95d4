"""KV-cache update with tensor start/end (the field study's remaining break)."""
import torch


class Cache(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("k", torch.zeros(2, 8, 4))

    def forward(self, k_new, start):
        end = start + k_new.shape[1]
        self.k[:, start:end] = k_new  # BREAK
        return self.k.sum(-1)


def target():
    torch.manual_seed(0)
    return [(Cache(), (torch.randn(2, 3, 4), torch.tensor(2)), {})]


EXPECT = 'rewrite'
