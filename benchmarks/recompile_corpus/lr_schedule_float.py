"""A compiled update step given the learning rate of a scheduler as a Python float."""
import torch

EXPECT = "fixed"


def sgd_step(param, grad, lr):
    return param - lr * grad


def target():
    torch.manual_seed(0)
    p, g = torch.randn(64), torch.randn(64)
    return [(sgd_step, (p, g, lr), {}) for lr in (0.1, 0.05, 0.025, 0.0125)]
