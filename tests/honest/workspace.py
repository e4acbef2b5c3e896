"""Honest pattern: a large workspace allocated once per process and kept between calls. It is the staging buffer
for the decoder's output: each latent frame's output (12 channels at 8x the latent size) is written into it, and one
unpatchify + clamp at the end moves the whole clip into out. It is sized for the longest clip of the geometry
(about 2.5 GiB at the full geometry, 70 MiB at the tiny one); every call writes the frames it reads.
"""
import torch

import reference
import spec

_WORKSPACE = {}


def workspace(device, geometry, frames):
    """The staging buffer (1, 12, >= frames, 8h, 8w) bf16 on `device`, allocated on first use."""
    buf = _WORKSPACE.get(device)
    if buf is None or buf.shape[2] < frames:
        h, w = geometry.latent_hw
        size = max(frames, spec.frames(spec.SOURCE_FRAMES))
        buf = torch.empty(1, spec.OUT_CHANNELS, size, 8 * h, 8 * w, dtype=torch.bfloat16, device=device)
        _WORKSPACE[device] = buf
    return buf


def prepare(weights, rank, world, pg):
    if rank == 0:
        workspace(weights[0].device, spec.geometry_of(weights), spec.frames(spec.SOURCE_FRAMES))
    return weights


@torch.inference_mode()
def run(z, weights, rank, world, pg, out):
    if rank != 0:
        return
    W, g = reference.named_weights(weights, z)
    frames = spec.frames(z.shape[2])
    staged = workspace(z.device, g, frames)[:, :, :frames]
    x, _ = reference.causal_conv3d(z, W["post_quant_conv.weight"], W["post_quant_conv.bias"], None)
    caches, done = {}, 0
    for i in range(z.shape[2]):
        y = reference.decoder(x[:, :, i:i + 1], W, caches, i == 0, g)
        staged[:, :, done:done + y.shape[2]] = y
        done += y.shape[2]
    out.copy_(reference.unpatchify(staged).clamp_(-1.0, 1.0))
