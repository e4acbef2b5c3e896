"""Honest pattern: a module-level cache of the decoder's weights, built once per process and reused by every call,
as a pipeline keeps its VAE loaded. The cache holds the weights by name (reference.named_weights), keyed by the
weight tensors' addresses; it never holds anything computed from the latents.
"""
import torch

import reference
import spec

_DECODERS = {}


def _decoder_weights(weights, z):
    key = (z.device, tuple(w.data_ptr() for w in weights))
    if key not in _DECODERS:
        _DECODERS[key] = reference.named_weights(weights, z)
    return _DECODERS[key]


@torch.inference_mode()
def run(z, weights, rank, world, pg, out):
    if rank != 0:
        return
    W, g = _decoder_weights(weights, z)
    x, _ = reference.causal_conv3d(z, W["post_quant_conv.weight"], W["post_quant_conv.bias"], None)
    caches, done = {}, 0
    for i in range(z.shape[2]):
        y = reference.decoder(x[:, :, i:i + 1], W, caches, i == 0, g)
        n = y.shape[2]
        out[:, :, done:done + n] = reference.unpatchify(y).clamp_(-1.0, 1.0)
        done += n
