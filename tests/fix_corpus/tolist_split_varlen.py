"""Variable-length sequences split by `lengths.tolist()` then pooled (adapted from
flash-attn varlen / packed-batch code)."""
import torch


def pool_varlen(x, lengths):
    chunks = x.split(lengths.tolist())  # BREAK
    return torch.stack([c.mean(0) for c in chunks])


def target():
    torch.manual_seed(0)
    return [(pool_varlen, (torch.randn(10, 4), torch.tensor([3, 5, 2])), {})]


EXPECT = ('rewrite: split-segment-reduce (index_add_ over segment ids), verified on fresh lengths that are a '
          'shuffle of the seen ones (still summing to x.shape[0])')
