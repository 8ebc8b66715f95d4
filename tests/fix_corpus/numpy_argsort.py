"""`np.argsort` over a tensor's values to reorder rows."""
import numpy as np
import torch


def sort_rows(x):
    order = np.argsort(x[:, 0].numpy())  # NO BREAK in torch 2.13 (control: no site expected)
    return x[torch.as_tensor(order)]


def target():
    torch.manual_seed(0)
    return [(sort_rows, (torch.randn(6, 3),), {})]


EXPECT = 'none: no break in torch 2.13 (numpy on tensors is traced); a control'
