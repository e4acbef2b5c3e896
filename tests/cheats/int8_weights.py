"""Cheat (narrow numerics): per-output-channel int8 weights on the 4x and 8x levels (up blocks 2 and 3, conv_out:
most of the FLOPs), dequantised to bf16 in prepare. The error stays within the allowance; the rule does not."""
import torch

import reference
import spec


def prepare(weights, rank, world, pg):
    names = [n for n, _ in spec.weight_list(spec.geometry_of(weights))]
    out = []
    for name, w in zip(names, weights):
        if name.startswith(("decoder.up_blocks.2.", "decoder.up_blocks.3.", "decoder.conv_out.")) and w.dim() >= 4:
            scale = w.float().abs().amax(dim=tuple(range(1, w.dim())), keepdim=True).clamp_min(1e-12) / 127
            w = ((w.float() / scale).round().clamp(-127, 127) * scale).to(torch.bfloat16)
        out.append(w)
    return out


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
