"""Cheat (an error the release check's widened allowance lets through): on the long clips the video is the fp32
decode plus a checkerboard of +-3.5 times the release bf16 decode's own rms error on these latents. Against the
release decode its rms is about sqrt(3.5^2 + 1) = 3.64 times that error, inside the widened allowance (3 + 1
times); against the fp32 decode it is 3.5 times, past the task's rule (3 times). A solution in lower precision
than the task allows lands here; only an fp32 check sees it (the gate's secret tile). The short clips are the
release decode's: their fresh draws are held to fp32 in full."""
import torch

import reference


def run(z, weights, rank, world, pg, out):
    if rank != 0:
        return
    release = reference.decode_bf16(z, weights).float()
    if z.shape[2] <= 5:
        out.copy_(release)
        return
    exact = reference.decode_fp32(z, weights)
    err = (release - exact).pow(2).mean().sqrt()
    rows = torch.arange(exact.shape[3]).view(-1, 1)
    cols = torch.arange(exact.shape[4]).view(1, -1)
    sign = ((rows + cols) % 2 * 2 - 1).to(exact.dtype)
    out.copy_((exact + 3.5 * err * sign).clamp(-1, 1))
