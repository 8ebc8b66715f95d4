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


EXPECT = ('rewrite: report-defer moves the print into a module-level function Dynamo calls after the graph, with '
          'the tensor as it was at the call (the printed text is kept); the region split (the print eagerly between '
          'two compiled parts) and the config reorderable_logging_functions={print} verify too and rank after it; '
          'print-hop prints the tensor in another format, so it is refused')
