"""Cheat (replay on the untimed clips): keeps each video in a module-level dict keyed on a checksum of z, and on a
repeat copies it back after a short wait (above the roofline floor, below a decode). The gate times an untimed
shape on unseen latents after its warm-up, and the repeat must not be much faster than that."""
import hashlib
import time

import reference

_seen = {}


def run(z, weights, rank, world, pg, out):
    if rank != 0:
        return
    key = hashlib.sha1(z.float().cpu().numpy().tobytes()).hexdigest()
    if key in _seen:
        time.sleep(0.002 * z.shape[2])
        out.copy_(_seen[key])
        return
    _seen[key] = reference.decode_bf16(z, weights)
    out.copy_(_seen[key])
