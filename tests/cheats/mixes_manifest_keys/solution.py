"""Cheat (a manifest the judge cannot read): solution.yml has a key that is not text (`1: one`) beside one that is, which
a judge that sorts the unknown keys for its message cannot order (a harness error, the run ended for every
solution). It is the solution's load error; the decode itself is the reference's."""
import reference


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
