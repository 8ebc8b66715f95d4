"""Sweep targets whose worker dies or hangs: each costs one row (after one retry)."""
import os
import time

import torch


def _abort(x):
    os.abort()  # SIGABRT: the worker dies mid-call


def _hang(x):
    time.sleep(3600)
    return x


def crashes():
    return (_abort, (torch.randn(2),), {})


def hangs():
    return (_hang, (torch.randn(2),), {})
