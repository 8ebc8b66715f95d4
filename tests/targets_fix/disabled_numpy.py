"""A helper the user disabled because its body cannot be traced (numpy on the tensor's
values): dropping the disable moves the break into the body, so it must be refused."""
import numpy as np
import torch


@torch.compiler.disable
def robust_scale(t):
    med = float(np.median(t.detach().numpy()))
    return t / (abs(med) + 1.0)


def model(x):
    h = x.sin()
    h = robust_scale(h)  # CALL
    return h.cos()


def target():
    torch.manual_seed(0)
    return [(model, (torch.randn(4, 5),), {})]
