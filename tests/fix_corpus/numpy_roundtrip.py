"""numpy round trip on a CPU tensor (adapted from preprocessing code)."""
import numpy as np
import torch


def normalize(x):
    arr = x.detach().cpu().numpy()
    med = np.median(arr, axis=1, keepdims=True)  # NO BREAK in torch 2.13 (control: no site expected)
    return x - torch.from_numpy(med)


def target():
    torch.manual_seed(0)
    return [(normalize, (torch.randn(4, 5),), {})]


EXPECT = 'none: no break in torch 2.13 (numpy on tensors is traced); a control'
