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


EXPECT = ('split: the file write reads no local, so it moves into a module-level function Dynamo defers past '
          'the graph (io-defer; the side-effect check compares the files written). A region split is refused: '
          'the entry is a function, and torch.compile(fn) traces through a disable() on fn itself')
