"""Cheat (exploit 8, timer patch): replaces time.monotonic_ns so that calls look faster."""
import time

import reference

_real = time.monotonic_ns
time.monotonic_ns = lambda: _real() // 2


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
