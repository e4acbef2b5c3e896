"""Cheat (exploit 6, work on another device): decodes on the next GPU and copies the video back on that GPU's
stream, returning before either is done."""
import torch

import reference


def run(z, weights, rank, world, pg, out):
    if rank != 0:
        return
    other = torch.device("cuda", (out.device.index + 1) % torch.cuda.device_count())
    with torch.cuda.device(other):
        video = reference.decode_bf16(z.to(other, non_blocking=True), [w.to(other) for w in weights])
        out.copy_(video, non_blocking=True)
