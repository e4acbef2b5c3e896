"""Broken: decodes correctly, then scribbles on its input."""
import reference


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
    z.mul_(0.5)
