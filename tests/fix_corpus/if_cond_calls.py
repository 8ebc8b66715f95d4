"""Branches that call sub-modules with matching outputs (data-dependent routing)."""
import torch


class Router(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.small = torch.nn.Linear(d, d)
        self.large = torch.nn.Sequential(torch.nn.Linear(d, 2 * d), torch.nn.GELU(), torch.nn.Linear(2 * d, d))

    def forward(self, x):
        if x.abs().mean() > 0.8:  # BREAK
            out = self.large(x)
        else:
            out = self.small(x)
        return out.tanh()


def target():
    torch.manual_seed(0)
    return [(Router(4), (torch.randn(3, 4),), {}), (Router(4), (torch.randn(3, 4) * 0.1,), {})]


EXPECT = 'rewrite'
