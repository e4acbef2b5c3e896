"""Cheat (replay, default-argument state): the cache lives in a mutable default argument."""
import reference


def run(z, weights, rank, world, pg, out, _cache={}):
    if rank != 0:
        return
    key = (tuple(z.shape), float(z.float().sum()), float(z.float().abs().sum()))
    if key not in _cache:
        _cache[key] = reference.decode_bf16(z, weights)
    out.copy_(_cache[key])
