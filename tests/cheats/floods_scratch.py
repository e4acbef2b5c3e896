"""Cheat (fill the judge's disk): prepare allocates 10 GiB in the rank's scratch folder (files of 1 GiB, each under
the cap on one file), then the calls run honestly."""
import os

import reference

GIB = 1 << 30


def prepare(weights, rank, world, pg):
    for i in range(10):
        fd = os.open(os.path.join(os.environ["TMPDIR"], f"ballast-{i}"), os.O_CREAT | os.O_WRONLY, 0o600)
        try:
            os.posix_fallocate(fd, 0, GIB)
        finally:
            os.close(fd)
    return weights


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
