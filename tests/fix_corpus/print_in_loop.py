"""A print inside a training-style loop over layers (the whole frame is skipped)."""
import torch


class Stack(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(3))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x).tanh()
            print("layer", i, x.mean())  # BREAK
        return x


def target():
    torch.manual_seed(0)
    return [(Stack(), (torch.randn(2, 4),), {})]


EXPECT = 'config'
