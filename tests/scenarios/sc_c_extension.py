import zlib

import torch


def f(x):
    y = x + 1
    check = zlib.crc32(b"graphstitch")  # BREAK
    return y * (check % 7)


def target():
    return f, (torch.randn(4),), {}
