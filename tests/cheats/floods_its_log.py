"""Cheat (fill the judge's disk): prepare prints 256 MiB at a time to its stdout, the judge's log of the rank, without
end."""
import os

import reference


def prepare(weights, rank, world, pg):
    chunk = b"x" * (256 << 20)
    while True:
        os.write(1, chunk)


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
