"""A break inside a loop: Dynamo skips the whole frame (GB7000 after the root id)."""
import torch


def looped(x):
    for _ in range(2):
        x = x + 1
        torch._dynamo.graph_break()  # TR_LOOP
    return x * 2


def inner_item(x):
    return x * x.sum().item()  # TR_ITEM


def calls():
    return [(looped, (torch.randn(4),), {}), (inner_item, (torch.randn(4),), {})]
