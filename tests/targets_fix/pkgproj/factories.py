import torch
from mypkg import TinyClassifier


def target():
    torch.manual_seed(0)
    model = TinyClassifier().eval()
    return [(model, (torch.randn(4, 16),), {}), (model, (torch.randn(4, 16),), {})]
