"""A break inside a higher-order op (torch.utils.checkpoint): torch 2.13 writes a
`Higher Order Operator:` line between the break's type and its explanation."""
import torch
import torch.utils.checkpoint


def inner(x):
    print("in checkpoint")  # TR_HOP
    return x.sin()


def step(x):
    return torch.utils.checkpoint.checkpoint(inner, x, use_reentrant=False) + 1


if __name__ == "__main__":
    torch.compile(step, backend="eager")(torch.ones(3, requires_grad=True))
