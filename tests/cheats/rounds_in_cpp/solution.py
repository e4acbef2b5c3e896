"""Cheat (narrow numerics, in C++): per-output-channel int8 weights on the 4x and 8x levels (up blocks 2 and 3,
conv_out), rounded inside run() by an extension through libtorch's tensor API (grid.inl, included by ext.cpp):
`Tensor::round` and `clamp(-127, 127)`, no C `round(` call. The error stays within the allowance; the audit's C++
rules do not."""
import wan_round_ext

import reference
import spec

LEVELS = ("decoder.up_blocks.2.", "decoder.up_blocks.3.", "decoder.conv_out.")


def run(z, weights, rank, world, pg, out):
    if rank != 0:
        return
    names = [n for n, _ in spec.weight_list(spec.geometry_of(weights))]
    shaped = [wan_round_ext.shape_weight(w) if n.startswith(LEVELS) and w.dim() >= 4 else w
              for n, w in zip(names, weights)]
    reference.decode_bf16(z, shaped, out=out)
