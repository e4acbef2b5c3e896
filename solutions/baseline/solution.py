"""The baseline (work in progress, issue 6): stage 1 and the first multi-rank stage, in plain PyTorch.

Stage 1: the reference's decoder fed several latent frames per pass. The decoder is causal: every conv sees its
input stream with two zero frames in front, the time convs skip the first latent frame, and the first chunk's special
cases concern that frame alone. So after the first latent frame (decoded alone, as diffusers does), CHUNK latent
frames go through the decoder at once with the same caches: the same arithmetic on 4 x CHUNK video frames per kernel
launch instead of 4, in bf16 with fp32 norm statistics (the reference's ops, without autocast).

Several ranks: every rank decodes a band of rows of every frame (bands.py), exchanging one halo row with each
neighbour per spatial convolution; rank 0 gathers the video bands into out.

Not yet measured on a GPU; channels-last layouts, Triton kernels, the 2x2 phase convolutions of the resamples and
overlapping the halo exchange with compute are the next stages.
"""
import torch
import torch.distributed as dist

import reference
import spec

from . import bands

CHUNK = 4   # latent frames per decoder pass after the first


def chunks(t):
    return [(0, 1)] + [(s, min(s + CHUNK, t)) for s in range(1, t, CHUNK)]


def run(z, weights, rank, world, pg, out):
    W, g = reference.named_weights(weights, z)
    t, h = z.shape[2], z.shape[3]
    band = bands.Band(rank, world, pg, h) if world > 1 else None
    if band is None and rank != 0:
        return
    if band is not None:
        z = z[:, :, :, rank * band.rows:(rank + 1) * band.rows]
    with torch.no_grad():
        x, _ = reference.causal_conv3d(z, W["post_quant_conv.weight"], W["post_quant_conv.bias"], None)
        caches, done = {}, 0
        for start, stop in chunks(t):
            if band is None:
                y = reference.decoder(x[:, :, start:stop], W, caches, start == 0, g)
            else:
                y = bands.decoder(x[:, :, start:stop], W, caches, start == 0, g, band)
            video = torch.clamp(reference.unpatchify(y), min=-1.0, max=1.0)
            n = video.shape[2]
            if band is None:
                out[:, :, done:done + n] = video
            else:
                parts = [torch.empty_like(video) for _ in range(world)] if rank == 0 else None
                dist.gather(video.contiguous(), parts, dst=0, group=pg)
                if rank == 0:
                    out[:, :, done:done + n] = torch.cat(parts, 3)
            done += n
    assert done == spec.frames(t)
