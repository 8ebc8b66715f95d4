import graphstitch_no_such_module  # noqa: F401
import torch


def target():
    return torch.sin, (torch.randn(2),), {}
