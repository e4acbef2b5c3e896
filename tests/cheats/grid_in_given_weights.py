"""Cheat (narrow numerics, hidden in the judge's weights): prepare keeps clean copies of the weights it was given
(which pass the census) and writes int8-grid values into the given ones, whose views the census passes as the
judge's; the first call puts the clean values back and keeps the grid for itself, so the weights look unchanged
after every call. The judge compares the weights as soon as prepare is done."""
import torch

import reference


def _grid(w):
    scale = w.float().abs().amax(dim=tuple(range(1, w.dim())), keepdim=True).clamp_min(1e-12) / 127
    return ((w.float() / scale).round().clamp(-127, 127) * scale).to(w.dtype)


def prepare(weights, rank, world, pg):
    keep = [w.clone() for w in weights]
    for w in weights:
        if w.dim() >= 4:
            w.copy_(_grid(w))
    return list(weights) + keep + [torch.zeros(1, device=weights[0].device)]


def run(z, weights, rank, world, pg, out):
    n = (len(weights) - 1) // 2
    given, keep, swapped = weights[:n], weights[n:2 * n], weights[-1]
    if swapped.item() == 0:
        for a, b in zip(given, keep):
            grid = a.clone()
            a.copy_(b)
            b.copy_(grid)
        swapped.fill_(1)
    reference.run(z, keep, rank, world, pg, out)
