"""Cheat (exploit 13, skipped work): decodes without the mid block's attention (zeroed projection)."""
import reference
import spec


def run(z, weights, rank, world, pg, out):
    if rank != 0:
        return
    i = spec.WEIGHT_NAMES.index("decoder.mid_block.attentions.0.proj.weight")
    w = list(weights)
    w[i], w[i + 1] = w[i] * 0, w[i + 1] * 0
    reference.run(z, w, rank, world, pg, out)
