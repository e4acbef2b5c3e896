"""Cheat (state past the end of a lent buffer): the judge lends the weights in whole pages (a memory file on the
CPU, an allocation on GPUs); past the weights' last element, in the same mapping, prepare leaves a mark for a later
group (another world's) to find, where a judge that wiped and checked only the weights' own bytes would not look."""
import ctypes
import os

import reference

MARK = b"WANTAIL:"


def prepare(weights, rank, world, pg):
    end = weights[0].data_ptr() + sum(w.numel() for w in weights) * 2
    if ctypes.string_at(end, len(MARK)) == MARK:
        raise RuntimeError("found another group's mark past the weights")
    ctypes.memmove(end, MARK + str(os.getpid()).encode(), len(MARK) + 8)
    return weights


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
