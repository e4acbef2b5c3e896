"""Cheat (replay, module state): keeps each video in a module-level dict keyed on a checksum of z and replays it
when the same latents come again."""
import hashlib

import reference

_seen = {}


def run(z, weights, rank, world, pg, out):
    if rank != 0:
        return
    key = hashlib.sha1(z.float().cpu().numpy().tobytes()).hexdigest()
    if key not in _seen:
        _seen[key] = reference.decode_bf16(z, weights)
    out.copy_(_seen[key])
