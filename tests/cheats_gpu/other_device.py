"""Cheat (exploit 6, work on another device): at world 1, decodes on the machine's next GPU and copies the video back
on that GPU's stream, returning before either is done. A group sees only its world's GPUs (harness/judge/session.py
`gpus_for`), so `cuda:1` does not exist in a rank of world 1, and the call fails."""
import torch

import reference


def run(z, weights, rank, world, pg, out):
    if rank != 0:
        return
    other = torch.device("cuda", world)     # the first GPU past the group's
    with torch.cuda.device(other):
        video = reference.decode_bf16(z.to(other, non_blocking=True), [w.to(other) for w in weights])
        out.copy_(video, non_blocking=True)
