"""Two gloo ranks on CPU; rank 1 meets one break more than rank 0."""
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def step(x, rank):
    y = x.sin()
    print("step")  # TR_RANK_ALL
    if rank == 1:
        torch._dynamo.graph_break()  # TR_RANK_ONE
    return y + 1


def worker(rank, world, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.compile(step, backend="eager")(torch.randn(4), rank)
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(worker, args=(2, int(sys.argv[1])), nprocs=2)
