"""Cheat (replay past a second look): decodes latents it has not seen and replays those it has, in a fifth of the
time its shape's fastest decode took (above the roofline floor, below a decode beyond any tolerance). With no bar for
a stored workload (ci --fresh-calls 1: f5's shape), the stored call gets a second look; its repeat, a replay, looks too fast and gets one
too. Had both looks drawn the same latents, the repeat's look would be replays of the first look's decodes, and the
repeat judged against replays."""
import time

import reference

_seen, _took = {}, {}


def run(z, weights, rank, world, pg, out):
    if rank != 0:
        return
    key = (tuple(z.shape), z.float().sum().item(), z.float().abs().sum().item(), z.float().square().sum().item())
    if key in _seen:
        time.sleep(_took[z.shape] / 5)
        out.copy_(_seen[key])
        return
    t0 = time.perf_counter()
    _seen[key] = reference.decode_bf16(z, weights)
    _took[z.shape] = min(_took.get(z.shape, 1e9), time.perf_counter() - t0)
    out.copy_(_seen[key])
