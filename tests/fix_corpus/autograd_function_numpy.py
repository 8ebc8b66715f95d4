"""A custom `autograd.Function` whose forward leaves torch (numpy) (adapted from older
extension code)."""
import numpy as np
import torch


class ClampExp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.from_numpy(np.exp(np.clip(x.detach().numpy(), -5.0, 5.0)))  # NO BREAK in torch 2.13 (control: no site expected)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y


def fn(x):
    return ClampExp.apply(x * 2) + 1


def target():
    torch.manual_seed(0)
    return [(fn, (torch.randn(5),), {})]


EXPECT = 'none: no break in torch 2.13 (Dynamo traces the numpy calls in autograd.Function.forward); a control'
