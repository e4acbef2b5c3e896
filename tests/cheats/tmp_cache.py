"""Cheat (a cache in /tmp shared by ranks, worlds and runs): keyed on a checksum of z; a later group of any world
replays the video that an earlier one decoded."""
import hashlib
import os

import torch

import reference

CACHE = "/tmp/wan-cheat-cache"


def run(z, weights, rank, world, pg, out):
    if rank != 0:
        return
    os.makedirs(CACHE, exist_ok=True)
    path = os.path.join(CACHE, hashlib.sha1(z.float().cpu().numpy().tobytes()).hexdigest() + ".pt")
    if os.path.exists(path):
        out.copy_(torch.load(path))
        return
    video = reference.decode_bf16(z, weights)
    out.copy_(video)
    torch.save(video, path)
