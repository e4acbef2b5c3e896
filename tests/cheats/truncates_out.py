"""Cheat (crash the judge): after decoding, finds the file behind out in /proc/self/maps and truncates it, so that
the judge, reading the mapping, dies of SIGBUS."""
import os

import reference


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if "/buffers-" in line}
    for path in paths:
        os.truncate(path, 0)
