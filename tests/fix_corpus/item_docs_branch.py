"""`.item()` whose Python value decides a Python branch (must be refused: keeping the tensor
moves the break to the `if`)."""
import torch


def clip_grad_like(x):
    norm = x.norm().item()  # BREAK
    if norm > 1.0:
        return x / norm
    return x


def target():
    torch.manual_seed(0)
    return [(clip_grad_like, (torch.randn(5),), {})]


EXPECT = 'none: the value decides a Python if; keeping the tensor only moves the break'
