"""The built-in demo target: a small model with the breaks people hit most, and a recompile.

``graphstitch census --demo`` runs ``demo()``: three calls whose batch size changes, so the
census shows break sites of several kinds and one recompile cause.
"""

import logging

import torch
from torch import nn

log = logging.getLogger("graphstitch.demo")


def normalize(h: torch.Tensor) -> torch.Tensor:
    scale = h.abs().mean().item()          # .item(): a Python float leaves the graph
    return h / (scale + 1e-6)


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
        self.norm = nn.LayerNorm(d)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.norm(h + self.ff(h))


class DemoModel(nn.Module):
    def __init__(self, d: int = 32, depth: int = 2) -> None:
        super().__init__()
        self.inp = nn.Linear(d, d)
        self.blocks = nn.ModuleList(Block(d) for _ in range(depth))
        self.out = nn.Linear(d, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        h = normalize(h)
        if h.sum() > 0:                    # data-dependent branch on a tensor value
            h = h.relu()
        log.debug("hidden %s", h.shape)    # logging call inside the compiled region
        h = self.blocks[0](h)
        h = self.blocks[1](h)
        return self.out(h)


def demo() -> list[tuple[nn.Module, tuple[torch.Tensor], dict[str, object]]]:
    torch.manual_seed(0)
    model = DemoModel().eval()
    return [(model, (torch.randn(b, 32),), {}) for b in (2, 3, 4)]
