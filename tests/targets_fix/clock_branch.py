"""A step that times itself and takes a branch only in the first process that runs it: the
shape of a timer whose reading crosses a threshold in one run and not the next (a clock
value Dynamo specialises on, a "slow step" report). Which process is first is a file the
test names (GS_FIRST_PID_FILE), so the census differs between runs deterministically."""
import os
import time

import torch


def first_process() -> bool:
    path = os.environ["GS_FIRST_PID_FILE"]
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        pass
    else:
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
    with open(path) as f:
        return f.read() == str(os.getpid())


def timed_step(x, w, slow):
    t0 = time.perf_counter()
    y = torch.relu(x @ w)
    if slow:
        total = y.sum().item()  # FIRST_RUN_ONLY
        y = y / (total + 1.0)
    elapsed = time.perf_counter() - t0
    return y, elapsed >= 0.0


def target():
    torch.manual_seed(0)
    return [(timed_step, (torch.randn(3, 4), torch.randn(4, 4), first_process()), {})]
