"""Cheat (a replay that stays above the roofline): replays the video of latents it has seen, after a sleep that keeps
the call slower than the hardware's limit but faster than a decode."""
import hashlib
import time

import reference

_seen = {}


def run(z, weights, rank, world, pg, out):
    if rank != 0:
        return
    key = hashlib.sha1(z.float().cpu().numpy().tobytes()).hexdigest()
    if key in _seen:
        time.sleep(0.05)
        out.copy_(_seen[key])
        return
    _seen[key] = reference.decode_bf16(z, weights)
    out.copy_(_seen[key])
