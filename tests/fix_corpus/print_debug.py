"""Debug print of a tensor statistic in a forward (common in research code)."""
import torch


class Block(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.lin = torch.nn.Linear(d, d)

    def forward(self, x):
        h = self.lin(x).relu()
        print("hidden norm", h.norm())  # BREAK
        return h * 2


def target():
    torch.manual_seed(0)
    return [(Block(4), (torch.randn(2, 4),), {})]


EXPECT = ('split: the print runs eagerly between two compiled parts of forward (the printed text is kept); the '
          'config reorderable_logging_functions={print} verifies too and ranks after it (a process-wide flag); '
          'print-hop prints the tensor in another format, so it is refused')
