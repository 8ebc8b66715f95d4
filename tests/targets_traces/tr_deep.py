"""A break three calls deep (reported once per nesting level) and a clean function."""
import torch


def c3(x):
    torch._dynamo.graph_break()  # TR_DEEP
    return x - 1


def c2(x):
    return c3(x * 2) + 1


def c1(x):
    return c2(x.sin()).cos()


def clean(x):
    return (x * 3).relu()


def calls():
    return [(c1, (torch.randn(3),), {}), (clean, (torch.randn(3),), {})]


