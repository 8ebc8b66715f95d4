"""Hostile strings where user code controls them: a function name and an error message."""
import torch

HOSTILE = "</script><img src=x onerror=alert(1)>"


def helper(x):
    print("x")  # TR_HOSTILE
    return x + 1


helper.__code__ = helper.__code__.replace(co_name=HOSTILE)


def fn(x):
    return helper(x.sin()) * 2


def boom(x):
    raise RuntimeError(HOSTILE + " & <b>bold</b>")


def calls():
    return [(fn, (torch.randn(3),), {}), (boom, (torch.randn(3),), {})]
