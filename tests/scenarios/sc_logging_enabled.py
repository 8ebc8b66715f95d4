import logging

import torch

log = logging.getLogger("graphstitch.scenario.enabled")
log.setLevel(logging.WARNING)
log.addHandler(logging.NullHandler())
log.propagate = False


def report(h):
    # Dynamo breaks inside logging/__init__.py; the site is this call.
    log.warning("mean is %s", h.shape)  # BREAK
    return h * 2


def f(x):
    return report(x.exp()) + 1


def target():
    return f, (torch.randn(3),), {}
