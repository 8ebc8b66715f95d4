"""A logger call in a helper (GB0291): ignore_logging_functions drops the message."""
import logging

import torch

log = logging.getLogger("targets_fix.log_helper")


def report(h):
    log.warning("mean %.3f", float(h.mean()))  # LOG
    return h * 2


def model(x):
    h = x.exp()
    h = report(h)
    return h + 1


def factory():
    torch.manual_seed(0)
    return [(model, (torch.randn(3, 5),), {})]
