"""Writing a debug line to a file between two stages (docs: Strategy 3 example)."""
import os
import tempfile

import torch

LOG = os.path.join(tempfile.mkdtemp(prefix="corpus-log-"), "debug.log")


def fn(x):
    x = x + 1
    with open(LOG, "a") as f:  # BREAK
        f.write("debug\n")
    x = x * 2
    return x


def target():
    return [(fn, (torch.randn(3),), {})]


EXPECT = ('none: the region split (I/O in a @torch.compiler.disable helper) still breaks at the call (GB0098); '
          'a file write is external state no output check can verify')
