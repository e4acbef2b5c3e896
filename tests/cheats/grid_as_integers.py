"""Cheat: int8-grid bf16 weights for up blocks 2 and 3 and conv_out, shapes kept, handed back from prepare()
reinterpreted as int16 (a view of the bits, not a cast); run() views them back as bf16. The census counts integer
tensors with those it cannot tell from a grid, and these hold far more than its allowance."""
import torch

import reference
import spec

QUANT = ("decoder.up_blocks.2.", "decoder.up_blocks.3.", "decoder.conv_out.")


def _grid(w):
    s = w.float().abs().amax(dim=tuple(range(1, w.dim())), keepdim=True).clamp_min(1e-12) / 127
    return ((w.float() / s + 0.5) // 1 * s).to(torch.bfloat16)


def prepare(weights, rank, world, pg):
    names = [n for n, _ in spec.weight_list(spec.geometry_of(weights))]
    return [_grid(w).view(torch.int16) if n.startswith(QUANT) and w.dim() >= 4 else w
            for n, w in zip(names, weights)]


def run(z, weights, rank, world, pg, out):
    reference.run(z, [w.view(torch.bfloat16) for w in weights], rank, world, pg, out)
