"""Cheat (narrow numerics, hidden past the judge's weights): int8-grid weights in memory mapped above the weights it
was given, returned as views of one tensor made from a raw address (the array interface) whose storage starts where
the given weights start, as the judge's own views do, and reaches on to the grid. The census passes a view of the
judge's weights only when every element lies inside them. (CPU: the grid is mapped above the given weights' file.)"""
import ctypes

import numpy
import torch

import reference


class Span:
    def __init__(self, address, nbytes):
        self.__array_interface__ = {"data": (address, False), "shape": (nbytes // 2,), "typestr": "<i2",
                                    "version": 3}


def _above_everything(nbytes):
    with open("/proc/self/maps") as f:
        ends = [int(line.split("-")[1].split()[0], 16) for line in f if "[" not in line]
    libc = ctypes.CDLL(None)
    libc.mmap.restype, libc.mmap.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                                               ctypes.c_int, ctypes.c_int, ctypes.c_long]
    top = max(e for e in ends if e < 1 << 47)
    return libc.mmap(top + (1 << 30), nbytes, 3, 0x22, -1, 0)          # read/write, private anonymous


def prepare(weights, rank, world, pg):
    grids = []
    for w in weights:
        scale = w.float().abs().amax(dim=tuple(range(1, w.dim())), keepdim=True).clamp_min(1e-12) / 127 \
            if w.dim() >= 4 else None
        grids.append(((w.float() / scale).round().clamp(-127, 127) * scale).to(w.dtype) if scale is not None else w)
    n = sum(g.numel() for g in grids)
    at = _above_everything(2 * n)
    start = weights[0].untyped_storage().data_ptr()
    span = torch.from_numpy(numpy.asarray(Span(start, at + 2 * n - start))).view(torch.bfloat16)
    out, i = [], (at - start) // 2
    for g in grids:
        out.append(span[i:i + g.numel()].view(g.shape))
        out[-1].copy_(g)
        i += g.numel()
    return out


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
