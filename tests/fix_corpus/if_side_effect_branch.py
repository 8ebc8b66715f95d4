"""A data-dependent `if` whose branch mutates module state: a where-rewrite would drop or
always apply the mutation, so no rewrite is right."""
import torch


class Clipper(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.clipped = 0

    def forward(self, x):
        n = x.norm()
        if n > 2.0:  # BREAK
            self.clipped += 1
            x = x * (2.0 / n)
        return x


def target():
    torch.manual_seed(0)
    return [(Clipper(), (torch.randn(8),), {})]


EXPECT = ('split: the branch (it mutates module state, so torch.where/cond would always or never apply it) runs'
          ' eagerly after the compiled norm')
