"""Cheat (a replay hidden in a wide spread): replays the video of latents it has seen after a short sleep, and slows
two of its unseen calls of each shape eightfold, so that the spread of its fresh calls, were it taken whole as the
noise, would cover the replay. The median of its timed calls stays honest."""
import time

import reference

_seen = []
_unseen = {}


def run(z, weights, rank, world, pg, out):
    if rank != 0:
        return
    for zs, video in _seen:
        if zs.shape == z.shape and zs.equal(z):
            time.sleep(0.06)
            out.copy_(video)
            return
    t = z.shape[2]
    n = _unseen[t] = _unseen.get(t, 0) + 1
    t0 = time.perf_counter()
    reference.decode_bf16(z, weights, out=out)
    _seen.append((z.clone(), out.clone()))
    if n in (3, 5):
        time.sleep(8 * (time.perf_counter() - t0))
