"""A cache keyed by `data_ptr()` (memoised preprocessing)."""
import torch

CACHE = {}


def cached_norm(x):
    key = x.data_ptr()  # NO BREAK in torch 2.13 (control: no site expected)
    if key not in CACHE:
        CACHE[key] = x.norm()
    return x / CACHE[key]


def target():
    torch.manual_seed(0)
    return [(cached_norm, (torch.randn(5),), {})]


EXPECT = 'none: no break in torch 2.13; a control'
