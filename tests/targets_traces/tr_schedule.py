"""Two gloo ranks compiling the same function with Inductor; on rank 1 Inductor buckets the two
all_reduces into one (a per-rank Inductor config): Dynamo's graphs agree, the executed
collective schedule (`inductor_collective_schedule`) does not."""
import datetime
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as fc
import torch.multiprocessing as mp


def step(x, y):
    a = fc.all_reduce(x, "sum", dist.group.WORLD)
    b = fc.all_reduce(y, "sum", dist.group.WORLD)
    return a.sin() + b.cos()  # TR_SCHEDULE


def worker(rank, world, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    # The ranks' schedules differ, so their collectives mismatch at run time: bound the wait.
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=30))
    if rank == 1:
        torch._inductor.config.bucket_all_reduces_fx = "all"
    torch.compile(step, backend="inductor")(torch.ones(4), torch.ones(4))
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(worker, args=(2, int(sys.argv[1])), nprocs=2)
