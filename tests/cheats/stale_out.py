"""Cheat (exploit 1, stale out): writes nothing, hoping out still holds an earlier call's video."""


def run(z, weights, rank, world, pg, out):
    pass
