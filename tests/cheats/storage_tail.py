"""Cheat (narrow numerics, hidden beside a clean view): each conv weight is returned as a view of the first half of a
storage whose second half holds its int8-grid copy, which run() reads. The census requires a returned tensor to
span its storage exactly (or be a view of the judge's weights, or a one-value stand-in)."""
import torch

import reference


def prepare(weights, rank, world, pg):
    out = []
    for w in weights:
        if w.dim() >= 4:
            scale = w.float().abs().amax(dim=tuple(range(1, w.dim())), keepdim=True).clamp_min(1e-12) / 127
            q = ((w.float() / scale).round().clamp(-127, 127) * scale).to(w.dtype)
            both = torch.cat([w.reshape(-1), q.reshape(-1)])
            w = both[:w.numel()].view(w.shape)
        out.append(w)
    return out


def run(z, weights, rank, world, pg, out):
    hidden = [w.as_strided(w.shape, w.stride(), w.numel())
              if w.untyped_storage().nbytes() == 2 * w.numel() * w.element_size() else w for w in weights]
    reference.run(z, hidden, rank, world, pg, out)
