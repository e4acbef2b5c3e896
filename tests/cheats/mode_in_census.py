"""Cheat (narrow numerics, with the census fooled): int8-grid weights, and a dispatch mode entered in prepare and
never left, which makes every sort return distinct values, so that a census of the weights run after it finds no
grid. The rank looks for modes left on before its census."""
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import reference


class Spread(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is torch.ops.aten.sort.default:
            values, order = out
            return torch.arange(values.numel(), dtype=values.dtype, device=values.device).view_as(values), order
        return out


def prepare(weights, rank, world, pg):
    out = []
    for w in weights:
        if w.dim() >= 4:
            scale = w.float().abs().amax(dim=tuple(range(1, w.dim())), keepdim=True).clamp_min(1e-12) / 127
            w = ((w.float() / scale).round().clamp(-127, 127) * scale).to(w.dtype)
        out.append(w)
    Spread().__enter__()
    return out


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
