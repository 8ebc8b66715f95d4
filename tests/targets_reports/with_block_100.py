"""A break at line 100, inside a `with` block (no loop)."""
import contextlib

import torch

# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100
# padding so that the site is on line 100


@contextlib.contextmanager
def scope():
    yield


def step(x):
    y = x * 2
    with scope():
        y = y + 1
        if y.sum() > 0:  # SITE
            y = y - 3
    return y


def target():
    torch.manual_seed(0)
    return [(step, (torch.randn(4),), {})]
