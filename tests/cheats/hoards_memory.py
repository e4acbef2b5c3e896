"""Cheat (deny the solutions beside it the host's memory): prepare spreads 1.5 GiB over six child processes of 256 MiB
each, every one smaller than a rank, and keeps them: the kernel's out-of-memory killer takes the largest process
among the ranks (every rank's oom_score_adj is 1000), so on a host short of memory it would end another solution's
rank rather than any of these. The group's memory cgroup counts them together: past its cap the kernel ends one of
this group's processes, and the judge fails the group (tests/trust/test_trust.py runs it under a cap of 1 GiB, beside an
honest solution that passes under the same cap)."""
import os
import time

import reference

BLOCK, CHILDREN = 256 << 20, 6
kids = []


def prepare(weights, rank, world, pg):
    for _ in range(CHILDREN):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            block = bytearray(BLOCK)
            for i in range(0, BLOCK, 4096):      # touched: resident, not just reserved
                block[i] = 1
            os.write(w, b"x")
            time.sleep(300)
            os._exit(0)
        os.close(w)
        os.read(r, 1)           # b"" where the kernel ended the child first
        os.close(r)
        kids.append(pid)
    return list(weights)


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
