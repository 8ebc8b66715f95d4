"""A C function Dynamo skips (zlib.crc32, GB0007) in a helper: nonstrict_trace removes it."""
import zlib

import torch


def salted(h):
    k = zlib.crc32(b"graphstitch") % 3 + 1  # SKIPPED
    return h * k


def model(x):
    h = x.sigmoid()
    h = salted(h)  # CALL
    return h.tanh()


def factory():
    torch.manual_seed(0)
    return [(model, (torch.randn(3, 4),), {})]
