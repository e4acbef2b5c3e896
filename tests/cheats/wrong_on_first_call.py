"""Cheat (wrong where it was checked in part): the first call of each shape is the gate's warm-up, whose fresh latents
were checked on their first video frames only (frames 1-5 depend on latent frames 1-2 alone); this one decodes those
and leaves the rest of that call's video zeros. Every call is now checked in full: the warm-up fails."""
import reference

_seen = set()


def run(z, weights, rank, world, pg, out):
    if rank != 0:
        return
    t = z.shape[2]
    first = t not in _seen
    _seen.add(t)
    if first and t > 2:
        out.zero_()
        reference.decode_bf16(z[:, :, :2], weights, out=out[:, :, :5])
        return
    reference.decode_bf16(z, weights, out=out)
