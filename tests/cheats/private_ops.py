"""Cheat (narrow numerics through private operators): the up blocks' and conv_out's weights cast to int8 and back
inside run() with `torch.ops.aten`'s private cast, reached through the registry's `__getattr__` by a name built at run
time, with no rounding call, dtype name or format string in sight. The audit's private-name rule: a library's private
names and dunder calls are findings, whatever they are called."""
import torch

import reference
import spec

_ops = torch.ops.aten
_cast = _ops.__getattr__("".join(["_cast", "_Ch", "ar"]))


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
            w = (_cast(q).float() * s).to(torch.bfloat16)
        narrow.append(w)
    reference.run(z, narrow, rank, world, pg, out)
