"""Cheat (code named by text): `logging.config`'s configurator resolves any dotted name given as text to its object
(an import and getattr), here torch's round, which then snaps the last up block's weights to an int8 grid inside
run(). `logging.config` reads configuration files too: the file-io rule names it."""
import logging.config

import torch

import reference
import spec

_snap = logging.config.BaseConfigurator({}).resolve("torch." + "ro" + "und")


def run(z, weights, rank, world, pg, out):
    if rank != 0:
        return
    names = [n for n, _ in spec.weight_list(spec.geometry_of(weights))]
    given = []
    for name, w in zip(names, weights):
        if name.startswith("decoder.up_blocks.3.") and w.dim() >= 4:
            step = w.float().abs().amax().clamp_min(1e-12) / 127
            w = (_snap(w.float() / step) * step).to(torch.bfloat16)
        given.append(w)
    reference.run(z, given, rank, world, pg, out)
