"""Broken: decodes, then writes frame 2 where frame 1 belongs (an off-by-one in where a frame goes): video frame 1,
the first of latent frame 1's four, is frame 2's."""
import reference


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
    if rank == 0 and out.shape[2] > 2:
        out[:, :, 1].copy_(out[:, :, 2])
