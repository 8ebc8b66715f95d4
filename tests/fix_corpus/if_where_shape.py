"""Branches assign the same name but with different shapes: `torch.where` would broadcast
silently. Plausible, must be refused."""
import torch


def pool(x):
    if x.mean() > 0:  # BREAK
        y = x.amax(dim=0, keepdim=True)
    else:
        y = x
    return y * 2


def target():
    torch.manual_seed(0)
    return [(pool, (torch.randn(4, 3) + 0.5,), {})]


EXPECT = (
    "caller: torch.where is refused (branches differ in shape, it would broadcast); the function entry's split runs"
    " the branch eagerly between compiled parts and the factory compiles that module (entry-split)"
)
