"""Cheat (exploit 10, output replacement): points out at new storage instead of writing the given buffer."""
import reference


def run(z, weights, rank, world, pg, out):
    if rank == 0:
        out.set_(reference.decode_bf16(z, weights))
