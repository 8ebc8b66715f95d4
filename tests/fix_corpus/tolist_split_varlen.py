"""Variable-length sequences split by `lengths.tolist()` then pooled (adapted from
flash-attn varlen / packed-batch code)."""
import torch


def pool_varlen(x, lengths):
    chunks = x.split(lengths.tolist())  # BREAK
    return torch.stack([c.mean(0) for c in chunks])


def target():
    torch.manual_seed(0)
    return [(pool_varlen, (torch.randn(10, 4), torch.tensor([3, 5, 2])), {})]


EXPECT = ('none: no rule turns a split by tensor sizes into tensor ops yet; the config flags and hatches tried '
          'do not verify')
