"""Cheat (narrow numerics through a legacy type's name): the up blocks' and conv_out's weights cast to int8 and back
inside run() by `Tensor.type("torch.CharTensor")`, a constant text that names no dtype the way `torch.int8` does.
The audit reads a text given where a dtype is expected as torch and numpy read it
(harness/audit/numerics.text_dtypes)."""
import torch

import reference
import spec


def run(z, weights, rank, world, pg, out):
    if rank != 0:
        return
    names = [n for n, _ in spec.weight_list(spec.geometry_of(weights))]
    narrow = []
    for name, w in zip(names, weights):
        if name.startswith(("decoder.up_blocks.2.", "decoder.up_blocks.3.", "decoder.conv_out.")) and w.dim() >= 4:
            s = w.float().abs().amax(dim=tuple(range(1, w.dim())), keepdim=True).clamp_min(1e-12) / 127
            q = w.float() / s
            q = q + q.sign() * 0.5                         # truncation below rounds to nearest
            w = (q.type("torch.CharTensor").float() * s).to(torch.bfloat16)
        narrow.append(w)
    reference.run(z, narrow, rank, world, pg, out)
