"""Coverage target: a break in a loop makes Dynamo skip the rest of a (resumed) frame.

TinyClassifier.forward breaks first at the .item() (FIRST): Dynamo resumes after it in a
resume function. There the loop calls Block.forward, whose print breaks inside the loop
(PRINT, reached from LOOP): Dynamo gives up on the resumed frame, so everything after the
loop runs eagerly and is never traced: the second .item() (LATER) breaks there, uncounted.
Head.forward shares the name `forward` with the two others; eager_helper is under
torch.compiler.disable, so Dynamo never traces its body.
"""
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.lin = nn.Linear(d, d)

    def forward(self, h):
        print("block")  # PRINT
        return self.lin(h).relu()


class Head(nn.Module):
    def __init__(self, d, classes):
        super().__init__()
        self.lin = nn.Linear(d, classes)

    def forward(self, h):
        return self.lin(h)


class TinyClassifier(nn.Module):
    def __init__(self, d=8, classes=3):
        super().__init__()
        self.inp = nn.Linear(d, d)
        self.blocks = nn.ModuleList([Block(d) for _ in range(2)])
        self.head = Head(d, classes)

    def forward(self, x):
        h = self.inp(x)
        scale = h.abs().mean().item()  # FIRST
        h = h / (scale + 1e-5)
        for blk in self.blocks:
            h = blk(h)  # LOOP
        n = h.sum().item()  # LATER
        return self.head(h) * n  # END


@torch.compiler.disable
def eager_helper(h):
    y = h * 2  # DISABLED_FIRST
    return y.cumsum(0)  # DISABLED_LAST


def with_disabled(x):
    y = x + 1
    y = eager_helper(y)  # CALLS_DISABLED
    return y * 3


def target():
    torch.manual_seed(0)
    return (TinyClassifier().eval(), (torch.randn(2, 8),), {})


def disabled_target():
    return (with_disabled, (torch.randn(4),), {})
