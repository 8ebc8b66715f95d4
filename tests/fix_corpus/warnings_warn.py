"""`warnings.warn` in a forward (deprecation paths in libraries)."""
import warnings

import torch


def fn(x):
    warnings.warn("fn is deprecated")  # BREAK  # noqa: B028
    return x.sin()


def target():
    return [(fn, (torch.randn(3),), {})]


# report-defer: warnings.warn in a function Dynamo defers past the graph (still raised); the config
# reorderable_logging_functions={warnings.warn} verifies too and ranks after it
EXPECT = "rewrite"
