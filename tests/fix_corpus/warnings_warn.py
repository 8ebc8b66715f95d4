"""`warnings.warn` in a forward (deprecation paths in libraries)."""
import warnings

import torch


def fn(x):
    warnings.warn("fn is deprecated")  # BREAK  # noqa: B028
    return x.sin()


def target():
    return [(fn, (torch.randn(3),), {})]


EXPECT = "config"  # reorderable_logging_functions={warnings.warn}: the warning is deferred after the graph, still raised
