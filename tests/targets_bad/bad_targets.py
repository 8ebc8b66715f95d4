"""Targets that go wrong in each way the CLI must report cleanly."""
import os
import time

import torch


def f(x):
    print("before the failure")  # BREAK
    return x + 1


def wrong_shape():
    return 42


def not_callable_fn():
    return "not a function", (torch.randn(2),), {}


def raises_in_eager():
    def boom(x):
        raise ValueError("the model is broken")
    return boom, (torch.randn(2),), {}


def _abort(x):
    os.abort()  # ABORT


def _hang(x):
    time.sleep(120)  # SLEEP
    return x


def segfault():
    # The first call compiles (and breaks at f's print); the second kills the process.
    return [(f, (torch.randn(2),), {}), (_abort, (torch.randn(2),), {})]


def hang():
    return [(f, (torch.randn(2),), {}), (_hang, (torch.randn(2),), {})]


not_a_factory = 3
