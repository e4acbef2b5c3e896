"""The baseline, stage 1 of issue 6 (work in progress): the reference's decoder, fed several latent frames per pass.

The decoder is causal: every conv sees its input stream with two zero frames in front, the time convs skip the first
latent frame, and the first chunk's special cases concern that frame alone. So after the first latent frame (decoded
alone, as diffusers does), CHUNK latent frames can go through the decoder at once with the same caches: the same
arithmetic on 4 x CHUNK video frames per kernel launch instead of 4, in bf16 with fp32 norm statistics (the
reference's ops, without autocast). Not yet measured on a GPU; the Triton kernels, the 2x2 phase convolutions of the
resamples and the multi-GPU band split are the next stages (issue 6). Rank 0 decodes; other ranks return.
"""
import torch

import reference
import spec

CHUNK = 4   # latent frames per decoder pass after the first


def run(z, weights, rank, world, pg, out):
    if rank != 0:
        return
    W, g = reference.named_weights(weights, z)
    with torch.no_grad():
        x, _ = reference.causal_conv3d(z, W["post_quant_conv.weight"], W["post_quant_conv.bias"], None)
        caches, done, t = {}, 0, z.shape[2]
        for start, stop in [(0, 1)] + [(s, min(s + CHUNK, t)) for s in range(1, t, CHUNK)]:
            y = reference.decoder(x[:, :, start:stop], W, caches, start == 0, g)
            n = y.shape[2]
            out[:, :, done:done + n] = torch.clamp(reference.unpatchify(y), min=-1.0, max=1.0)
            done += n
    assert done == spec.frames(t)
