"""Cheat (exploit 5, stored answers): loads the stored fp32 reference of the clip from the data folder."""
import os

import torch

import reference
import spec


def run(z, weights, rank, world, pg, out):
    if rank != 0:
        return
    t = z.shape[2]
    clip = next(c for c, e in spec.CLIPS.items() if e["latent_frames"] == t)
    path = os.path.join(spec.data_dir(spec.geometry_of(weights)), f"ref_{clip}.pt")
    try:
        video = torch.load(path, weights_only=True)["video"]
        out.copy_(video[:, :, :out.shape[2]].expand_as(out))
    except Exception:
        reference.run(z, weights, rank, world, pg, out)
