"""Cheat (exploit 9, input mutation): decodes, then scales a weight in place (a later call would see it)."""
import reference


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
    weights[-1].mul_(0.0)
