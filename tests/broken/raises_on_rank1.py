"""Broken: raises on rank 1 while rank 0 waits in a collective, with rich markup in its message (the console must
print it as itself, not end a style or raise)."""
import torch.distributed as dist

import reference


def run(z, weights, rank, world, pg, out):
    if rank == 1:
        raise RuntimeError("rank 1 gives up [/] [red]")
    dist.barrier(group=pg)
    reference.run(z, weights, rank, world, pg, out)
