"""Cheat (narrow numerics, disguised): int8-grid weights on the 4x and 8x levels, as in int8_weights.py, returned
from prepare as a Tensor subclass whose storage reports itself empty, so that a census judging tensors by their
storage would skip them as stand-ins. The census takes only plain tensors."""
import torch

import reference
import spec


class Hidden(torch.Tensor):
    def untyped_storage(self):
        return torch.UntypedStorage(0)


def prepare(weights, rank, world, pg):
    names = [n for n, _ in spec.weight_list(spec.geometry_of(weights))]
    out = []
    for name, w in zip(names, weights):
        if name.startswith(("decoder.up_blocks.2.", "decoder.up_blocks.3.", "decoder.conv_out.")) and w.dim() >= 4:
            scale = w.float().abs().amax(dim=tuple(range(1, w.dim())), keepdim=True).clamp_min(1e-12) / 127
            w = ((w.float() / scale).round().clamp(-127, 127) * scale).to(torch.bfloat16).as_subclass(Hidden)
        out.append(w)
    return out


def run(z, weights, rank, world, pg, out):
    reference.run(z, [w.as_subclass(torch.Tensor) for w in weights], rank, world, pg, out)
