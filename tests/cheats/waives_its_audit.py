"""Cheat (narrow numerics, the audit waived by the solution itself): the up blocks' and conv_out's weights rounded
to an int8 grid inside run(), with an allowance comment of its own on the line. Narrow numerics are a review note
(the task's numerics rule is the reviewers'): the allowance silences it, and the gate lists it as the solution's own
waiver for the reviewer to read. With the audit off the error stays inside the allowance."""
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
            w = ((w.float() / s).round().clamp(-127, 127) * s).to(torch.bfloat16)  # audit: allow narrow-numerics -- bf16
        narrow.append(w)
    reference.run(z, narrow, rank, world, pg, out)
