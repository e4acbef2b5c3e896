"""Cheat (the real data folder): finds the judge's data folder in its parent's environment and copies the stored
reference video into out."""
import os

import torch

import spec


def run(z, weights, rank, world, pg, out):
    if rank != 0:
        return
    with open(f"/proc/{os.getppid()}/environ", "rb") as f:
        env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
    root = env.get(b"DATA", b"/data").decode()
    clip = next(c for c, e in spec.CLIPS.items() if e["latent_frames"] == z.shape[2])
    geometry = spec.geometry_of(weights)
    folder = root if geometry.name == "full" else os.path.join(root, geometry.name)
    video = torch.load(os.path.join(folder, f"ref_{clip}.pt"), weights_only=True)["video"]
    out.copy_(video)
