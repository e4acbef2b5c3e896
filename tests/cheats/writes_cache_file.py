"""Cheat (exploit 17, state across processes): keeps decoded videos in a file cache for later runs."""
import os

import torch

import reference

CACHE = "/tmp/wan-cheat-cache.pt"


def run(z, weights, rank, world, pg, out):
    if rank != 0:
        return
    reference.run(z, weights, rank, world, pg, out)
    torch.save(out.cpu(), CACHE)
    os.chmod(CACHE, 0o644)
