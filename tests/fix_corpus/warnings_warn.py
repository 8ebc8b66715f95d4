"""`warnings.warn` in a forward (deprecation paths in libraries)."""
import warnings

import torch


def fn(x):
    warnings.warn("fn is deprecated")  # BREAK  # noqa: B028
    return x.sin()


def target():
    return [(fn, (torch.randn(3),), {})]


EXPECT = ('none: the warning is in the compiled function itself (no wrapper target); reorderable_logging_functi'
          'ons would keep it, but warnings are not in the side-effect check, so nothing is offered as verified')
