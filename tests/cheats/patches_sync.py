"""Cheat (exploit 8, synchronisation patch): makes torch.cuda.synchronize a no-op, so queued work escapes the
timer."""
import torch

import reference


def prepare(weights, rank, world, pg):
    torch.cuda.synchronize = lambda device=None: None
    return weights


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
