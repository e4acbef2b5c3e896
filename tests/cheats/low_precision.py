"""Cheat (exploit 12, precision downcast): rounds the weights to fp8 (e4m3) before decoding."""
import torch

import reference


def run(z, weights, rank, world, pg, out):
    if rank == 0:
        narrow = [w.to(torch.float8_e4m3fn).to(torch.bfloat16) for w in weights]
        reference.run(z, narrow, rank, world, pg, out)
