"""Cheat (crash the judge): in prepare, each rank closes the read end of its command pipe (an idle pipe in its place),
so that the judge's first `go` meets a broken pipe."""
import os
import sys

import reference

_keep = []


def prepare(weights, rank, world, pg):
    idle_r, idle_w = os.pipe()
    _keep.extend([idle_r, idle_w])
    os.dup2(idle_r, int(sys.argv[1]))
    return weights


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
