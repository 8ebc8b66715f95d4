"""A boolean keyword (output_attentions-style) that changes what is returned."""
import torch

EXPECT = "expected"


def attn(q, k, return_weights=False):
    w = (q @ k.T).softmax(-1)
    out = w @ k
    if return_weights:
        return out, w
    return out


def target():
    torch.manual_seed(0)
    q, k = torch.randn(3, 4), torch.randn(5, 4)
    return [(attn, (q, k), {"return_weights": False}), (attn, (q, k), {"return_weights": True})]
