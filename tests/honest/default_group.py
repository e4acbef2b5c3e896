"""Honest pattern: torch.distributed's default process group instead of the `pg` argument, as multi-GPU scripts
write it. Rank 0 decodes the release's bf16 video. Every rank then meets the others on the default group: its rank
and size checked against run's arguments, a barrier, and a broadcast of rank 0's count of finite elements.
"""
import torch
import torch.distributed as dist

import reference


def run(z, weights, rank, world, pg, out):
    if dist.is_initialized():
        assert (dist.get_rank(), dist.get_world_size()) == (rank, world)
    if rank == 0:
        out.copy_(reference.decode_bf16(z, weights))
    if world == 1:
        return
    dist.barrier()
    count = torch.zeros(1, dtype=torch.int64, device=z.device)
    if rank == 0:
        count += torch.isfinite(out).sum()
    dist.broadcast(count, src=0)
    assert count.item() > 0
