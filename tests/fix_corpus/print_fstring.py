"""f-string print with a formatted tensor value."""
import torch


def step(x, w):
    loss = ((x @ w) ** 2).mean()
    print(f"loss={loss:.4f} max={x.max():.3f}")  # BREAK
    return loss * 2


def target():
    torch.manual_seed(0)
    return [(step, (torch.randn(3, 4), torch.randn(4, 2)), {})]


EXPECT = 'rewrite'
