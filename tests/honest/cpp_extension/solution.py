"""Honest pattern: a small C++ extension (built from solution.yml's sources) doing part of the work: the unpatchify
and clamp of each chunk of decoder output, written straight into out with ATen ops, so it runs on CPU and CUDA
tensors alike. The decoder itself is reference.py's, in bf16.
"""
import torch

import reference
import wan_honest_unpatchify


@torch.inference_mode()
def run(z, weights, rank, world, pg, out):
    if rank != 0:
        return
    W, g = reference.named_weights(weights, z)
    x, _ = reference.causal_conv3d(z, W["post_quant_conv.weight"], W["post_quant_conv.bias"], None)
    caches, done = {}, 0
    for i in range(z.shape[2]):
        y = reference.decoder(x[:, :, i:i + 1], W, caches, i == 0, g)
        wan_honest_unpatchify.unpatchify_into(out, y, done)
        done += y.shape[2]
