"""`.item()` whose Python value decides a Python branch: keeping the tensor alone would move
the break to the `if`; keeping it AND turning the `if` into torch.where removes it."""
import torch


def clip_grad_like(x):
    norm = x.norm().item()  # BREAK
    if norm > 1.0:
        return x / norm
    return x


def target():
    torch.manual_seed(0)
    return [(clip_grad_like, (torch.randn(5),), {})]


EXPECT = 'rewrite'
