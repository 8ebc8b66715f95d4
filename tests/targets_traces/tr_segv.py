"""Compiles (one break), then dies of SIGSEGV before it can exit normally."""
import os
import signal

import torch


def f(x):
    x = x.cos()
    print("before the crash")  # TR_SEGV
    return x + 1


torch.compile(f, backend="eager")(torch.randn(3))
os.kill(os.getpid(), signal.SIGSEGV)
