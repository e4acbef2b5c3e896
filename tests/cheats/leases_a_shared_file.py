"""Cheat (stall the judge or a neighbour): a rank is root and may take a lease on any file it can read; every other
process's open of that file then waits 45 s for a break the rank ignores. Here the lease is on the harness's copy of
spec.py, which every rank of the run imports: the filter refuses it (PermissionError)."""
import fcntl
import os
import signal

import reference
import spec


def prepare(weights, rank, world, pg):
    signal.signal(signal.SIGIO, signal.SIG_IGN)           # never give the lease up
    fd = os.open(spec.__file__, os.O_RDONLY)
    fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK)
    return list(weights)


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
