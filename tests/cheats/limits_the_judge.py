"""Cheat (kill the judge, or a neighbour): any process of the same user may lower another's resource limits, and a
judge whose limits are lowered dies (a CPU-time limit) or cannot open its files. Here a harmless limit of the judge's
(core dumps) stands for them: the filter refuses it (PermissionError), and the judge's stays as it was."""
import os
import resource

import reference


def prepare(weights, rank, world, pg):
    resource.prlimit(os.getppid(), resource.RLIMIT_CORE, (0, 0))
    return list(weights)


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
