"""Honest, with a compiler's cost: the reference's decode, and the first call of each clip length in a process pays
0.5 s more, as a JIT compile or autotune for a new shape does. The gate must not take the slow first call of an
untimed shape (its warm-up) for the speed of fresh latents, and so call the next, faster ones replays. (A module
cache of the lengths seen, which the audit flags: the test runs the gate without it.)"""
import time

import reference

_SEEN = set()


def run(z, weights, rank, world, pg, out):
    if z.shape[2] not in _SEEN:
        _SEEN.add(z.shape[2])
        time.sleep(0.5)
    reference.run(z, weights, rank, world, pg, out)
