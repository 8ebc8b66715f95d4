"""A training script run with `graphstitch ranks --script`: it starts its own process group
and compiles with its own backend; --log-rank R prints on rank R inside the compiled step."""
import argparse

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=1)
parser.add_argument("--log-rank", type=int, default=-1)
args = parser.parse_args()

dist.init_process_group("gloo")


@torch.compile(backend="eager")
def step(x):
    y = torch.sin(x)
    if dist.get_rank() == args.log_rank:
        print("step on rank", args.log_rank)  # SCRIPT_PRINT
    dist.all_reduce(y)
    return y * 2


for _ in range(args.steps):
    step(torch.ones(4))
dist.destroy_process_group()
