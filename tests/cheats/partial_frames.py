"""Cheat (exploit 13, partial work): decodes only the first half of the latent frames and repeats the last decoded
frame for the rest of the video."""
import reference
import spec


def run(z, weights, rank, world, pg, out):
    if rank != 0:
        return
    t = max(1, (z.shape[2] + 1) // 2)
    video = reference.decode_bf16(z[:, :, :t].contiguous(), weights)
    n = spec.frames(t)
    out[:, :, :n].copy_(video)
    out[:, :, n:].copy_(video[:, :, -1:].expand_as(out[:, :, n:]))
