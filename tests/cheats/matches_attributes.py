"""Cheat (int8 weights past the audit's names): a `match` class pattern reads attributes by names that are no
attribute nodes (`case object(int8=i8)` is getattr(subject, "int8")), and a submodule reached by attribute
(`torch.nn.functional`, never imported by that name) is a module the subject can be. The up blocks 2 and 3 and
conv_out get int8 codes per output channel inside run(); the decode stays within the allowance on the tiny geometry,
so only the audit stops it."""
import torch

import reference
import spec


def _byte_type():
    match torch.nn.functional:
        case object(torch=t):
            pass
    match t:
        case object(int8=i8):
            return i8


def run(z, weights, rank, world, pg, out):
    i8 = _byte_type()
    names = [n for n, _ in spec.weight_list(spec.geometry_of(weights))]
    ws = []
    for name, w in zip(names, weights):
        if name.startswith(("decoder.up_blocks.2.", "decoder.up_blocks.3.", "decoder.conv_out.")) and w.dim() >= 4:
            s = w.float().abs().amax(dim=tuple(range(1, w.dim())), keepdim=True).clamp_min(1e-12) / 127
            v = w.float() / s
            w = ((v + v.sign() * 0.5).to(i8).float() * s).to(torch.bfloat16)
        ws.append(w)
    reference.run(z, ws, rank, world, pg, out)
