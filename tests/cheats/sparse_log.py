"""Cheat (a log of many gigabytes that takes no disk, past a count of the disk's blocks): prepare moves its stdout, the
judge's log of the rank, 64 GiB on and writes a line there."""
import os

import reference


def prepare(weights, rank, world, pg):
    os.lseek(1, 64 << 30, os.SEEK_SET)
    os.write(1, b"the end of a long log\n")
    return weights


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
