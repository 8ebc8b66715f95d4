"""Reading a window at a tensor offset (rotary caches, sliding windows)."""
import torch


def window(x, pos):
    return x[:, pos:pos + 3] * 2  # BREAK


def target():
    torch.manual_seed(0)
    return [(window, (torch.randn(2, 10), torch.tensor(4)), {})]


EXPECT = 'rewrite'
