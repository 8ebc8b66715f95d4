"""An activation chosen by name per call (a config string selecting code)."""
import torch

EXPECT = "expected"


def act(x, name):
    if name == "gelu":
        return torch.nn.functional.gelu(x)
    return torch.relu(x)


def target():
    x = torch.randn(8)
    return [(act, (x, "gelu"), {}), (act, (x, "relu"), {})]
