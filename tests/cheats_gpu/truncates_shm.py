"""Cheat (crash the judge through /dev/shm): a rank on a GPU may write /dev/shm (NCCL's files). On its first call it
truncates every file there it can; on its second it fails, so a new group is started and the judge lends its buffers
again. Had the judge lent them through files of /dev/shm that it maps (torch's CUDA IPC reference counters, the
driver's IPC event files), its next touch of one would kill it with SIGBUS: no verdict, no JSON, the other
solutions' results lost."""
import os
import sys

import reference

calls = [0]


def run(z, weights, rank, world, pg, out):
    calls[0] += 1
    if calls[0] == 1:
        for name in sorted(os.listdir("/dev/shm")):
            try:
                os.truncate(os.path.join("/dev/shm", name), 0)
                print(f"truncated /dev/shm/{name}", file=sys.stderr, flush=True)
            except OSError as e:
                print(f"could not truncate /dev/shm/{name}: {e}", file=sys.stderr, flush=True)
    if calls[0] == 2:
        raise RuntimeError("failed on purpose: a new group takes the judge's buffers")
    reference.run(z, weights, rank, world, pg, out)
