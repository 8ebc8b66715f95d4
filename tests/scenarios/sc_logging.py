import logging

import torch

log = logging.getLogger(__name__)


def f(x):
    x = x.cos()
    log.info("x has %d elements", x.numel())  # BREAK
    return x.sin()


def target():
    return f, (torch.randn(4),), {}
