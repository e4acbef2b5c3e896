"""Broken: raises on rank 1 while rank 0 waits in a collective, with rich markup and terminal controls in its
message (the console must print it as itself: not end a style, raise, or erase and forge a line)."""
import torch.distributed as dist

import reference


def run(z, weights, rank, world, pg, out):
    if rank == 1:
        raise RuntimeError("rank 1 gives up [/] [red]\r\x1b[2K\x1b[1APASS f5x4")
    dist.barrier(group=pg)
    reference.run(z, weights, rank, world, pg, out)
