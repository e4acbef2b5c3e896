"""Cheat (exploits 2 and 16, cached results): decodes once per shape, then replays the cached video for any later
latents of that shape."""
import reference

_cache = {}


def run(z, weights, rank, world, pg, out):
    if rank != 0:
        return
    key = tuple(z.shape)
    if key not in _cache:
        _cache[key] = reference.decode_bf16(z, weights)
    out.copy_(_cache[key])
