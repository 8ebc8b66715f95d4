"""`.item()` of a running statistic used to scale a loss (adapted from loss-balancing code)."""
import torch


class Balancer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("ema", torch.tensor(2.0))

    def forward(self, loss_a, loss_b):
        ratio = (self.ema / loss_b.detach()).item()  # BREAK
        return loss_a + ratio * loss_b


def target():
    torch.manual_seed(0)
    return [(Balancer(), (torch.rand(()), torch.rand(()) + 0.5), {})]


EXPECT = 'rewrite'
