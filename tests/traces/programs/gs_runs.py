# Two runs in one process (torch._dynamo.reset() between): frame ids restart at 0 in one log.
import torch


def g(x):
    x = x + 1
    print("g")  # RUNS_PRINT
    return x * 2


if __name__ == "__main__":
    for run in range(2):
        c = torch.compile(g, backend="eager")
        c(torch.ones(3))
        c(torch.ones(5))
        torch._dynamo.reset()
