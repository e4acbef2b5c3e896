"""Cheat (exploit 6, side stream): decodes on a side stream and returns without waiting for it."""
import torch

import reference

_stream = None


def run(z, weights, rank, world, pg, out):
    global _stream
    if rank != 0:
        return
    _stream = _stream or torch.cuda.Stream()
    _stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(_stream):
        reference.decode_bf16(z, weights, out=out)
