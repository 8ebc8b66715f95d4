"""A lazy import inside a forward (optional-dependency pattern in libraries)."""
import torch


def fn(x):
    import scipy.special
    return x * scipy.special.expit(0.0)  # BREAK


def target():
    torch.manual_seed(0)
    return [(fn, (torch.randn(3),), {})]


EXPECT = ('none: in torch 2.13 the import itself is traced; the break is the call of a scipy ufunc, for which n'
          'o verified torch equivalent exists (hoisting the import is proposed and refused)')
