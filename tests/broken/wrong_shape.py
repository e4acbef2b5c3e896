"""Broken: resizes out to one frame fewer and fills it."""


def run(z, weights, rank, world, pg, out):
    if rank == 0:
        out.resize_(out.shape[0], out.shape[1], out.shape[2] - 1, out.shape[3], out.shape[4]).zero_()
