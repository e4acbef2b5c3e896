"""The synthetic data set: seeded decoder weights and latents of the task's shapes, deterministic on the CPU.

Weights behave like a trained decoder's where the checks look: conv weights scaled by fan-in (std 1/sqrt(fan_in)),
RMS-norm gains near 1 (1 + 0.1 N(0, 1)), small biases (PyTorch's default U(-1/sqrt(fan_in), 1/sqrt(fan_in))), and
conv_out scaled by CONV_OUT_GAIN so that the video has a std near 0.3 with well under 1% of its pixels at the clamp.
They are drawn in fp32 and shipped rounded to bf16; the reference decodes use the rounded values.

Latents are a smooth random field, not white noise: Gaussian noise blurred in time (sigma LATENT_SIGMA_T latent
frames) and space (sigma LATENT_SIGMA_HW latent pixels), renormalised per channel, then given spec.LATENTS_MEAN and
spec.LATENTS_STD per channel (their first C values for a geometry of C latent channels).

Seeds and secrecy: every draw comes from its own stream of the seed (stream_seed: a hash of "<seed>/<stream>"), the
weights from "weights" and the latents from "latents/<key>". What is secret is the latents: a data set made without
--seed has a secret seed (data/make.py), and the gate draws fresh latents from a secret seed of its own
(latents(geometry, seed, "ci/<i>", frames)). The weights are not secret (a solution is handed them), and since the
streams' seeds come from a cryptographic hash, weights (or latents) of one stream tell nothing about another's.
"""
import hashlib
import math

import torch
import torch.nn.functional as F

import spec

CONV_OUT_GAIN = 0.5
GAMMA_SPREAD = 0.1
LATENT_SIGMA_T = 1.5
LATENT_SIGMA_HW = 2.0


def stream_seed(seed, stream):
    """A generator seed for one named stream of a seed: 63 bits of sha256("<seed>/<stream>"), stable across runs
    (unlike hash()) and one-way, so that a stream's generator seed, which its output gives away to a brute-force
    search (torch's CPU generator keeps only 32 bits of it), says nothing about the seed or the other streams.
    (A CRC, as in format 1, is invertible: the weights' stream seed gave away every latents stream seed.)"""
    digest = hashlib.sha256(f"{seed}/{stream}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def weights(geometry, seed):
    """fp32 tensors of spec.weight_list(geometry), in order, drawn from one generator."""
    g = torch.Generator().manual_seed(stream_seed(seed, "weights"))
    out, fan_in = [], 1
    for name, shape in spec.weight_list(geometry):
        if name.endswith(".gamma"):
            t = 1.0 + GAMMA_SPREAD * torch.randn(shape, generator=g)
        elif name.endswith(".bias"):
            bound = 1.0 / math.sqrt(fan_in)  # fan-in of the weight just before it
            t = (2.0 * torch.rand(shape, generator=g) - 1.0) * bound
        else:
            fan_in = math.prod(shape[1:])
            t = torch.randn(shape, generator=g) / math.sqrt(fan_in)
            if name == "decoder.conv_out.weight":
                t *= CONV_OUT_GAIN
        out.append(t.contiguous())
    return out


def _blur(x, dim, sigma):
    """Gaussian blur of x (1, C, T, H, W) along dim 2, 3 or 4, per channel, 'valid': the result is 2r shorter there."""
    r = math.ceil(3 * sigma)
    k = torch.exp(-0.5 * (torch.arange(-r, r + 1, dtype=torch.float64) / sigma) ** 2)
    shape = [1, 1, 1, 1, 1]
    shape[dim] = 2 * r + 1
    kernel = (k / k.sum()).to(x.dtype).view(shape).expand(x.shape[1], *shape[1:]).contiguous()
    return F.conv3d(x, kernel, groups=x.shape[1])


def latents(geometry, seed, source, frames=spec.SOURCE_FRAMES):
    """fp32 [1, C, frames, h, w]: a smooth field with the VAE's per-channel latent statistics, drawn from stream
    "latents/<source>" of `seed`. `source` is any string key (a source's name for the data set, "ci/<i>" for the
    gate's fresh draws): equal (seed, key, frames) give equal latents, another seed or key other latents."""
    g = torch.Generator().manual_seed(stream_seed(seed, f"latents/{source}"))
    c, (h, w) = geometry.latent_channels, geometry.latent_hw
    rt, rs = math.ceil(3 * LATENT_SIGMA_T), math.ceil(3 * LATENT_SIGMA_HW)
    x = torch.randn(1, c, frames + 2 * rt, h + 2 * rs, w + 2 * rs, generator=g)  # margins: 'valid' blurs
    for dim, sigma in ((2, LATENT_SIGMA_T), (3, LATENT_SIGMA_HW), (4, LATENT_SIGMA_HW)):
        x = _blur(x, dim, sigma)
    x = x.view(c, -1)
    x = (x - x.mean(1, keepdim=True)) / x.std(1, keepdim=True)
    mean = torch.tensor(spec.LATENTS_MEAN[:c]).view(c, 1)
    std = torch.tensor(spec.LATENTS_STD[:c]).view(c, 1)
    return (x * std + mean).view(1, c, frames, h, w).contiguous()
