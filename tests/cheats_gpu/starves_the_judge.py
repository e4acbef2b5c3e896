"""Cheat (the judge out of GPU memory): keeps all of its GPU's memory but 2 GiB from prepare on, so that the judge's
own decode of the fresh latents' references, beside it, runs out (before the cap, bench ended with a traceback and
no results for any solution)."""
import torch

import reference

_kept = []


def prepare(weights, rank, world, pg):
    free, _ = torch.cuda.mem_get_info()
    while free > (3 << 30):
        _kept.append(torch.empty(1 << 30, dtype=torch.uint8, device="cuda"))
        free, _ = torch.cuda.mem_get_info()
    return list(weights)


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
