"""Broken: the whole decode on rank 0, but at world > 1 the first video row of every band below the first is the row
above it, as if the halo between the bands were exchanged one row off (spec.video_seams: where the bands begin)."""
import reference
import spec


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
    if rank == 0:
        for row in spec.video_seams(world, spec.geometry_of(weights)):
            out[:, :, :, row].copy_(out[:, :, :, row - 1])
