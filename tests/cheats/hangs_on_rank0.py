"""Broken (exploit 19, denial): rank 0 never returns."""
import time


def run(z, weights, rank, world, pg, out):
    while rank == 0:
        time.sleep(0.5)
