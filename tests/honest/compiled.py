"""Honest pattern: torch.compile (inductor, static shapes) of the per-latent-frame decoder step, by regions: the
stem (conv_in and the mid block), each up block, and the head are compiled functions (reference.py's ops), called in
turn for every latent frame with the causal caches.

The first latent frame takes its own code path (no caches, no time conv) and runs eagerly. After it, every one-frame
cache gets a zero frame in front: a two-frame cache whose first frame is zero is what the causal padding would have
put there, so every later frame sees caches of the same shapes and runs through the same compiled graphs. prepare()
warms them up on zero latents (compiling is untimed there). The weights and the caches are inputs of the graphs,
not constants baked into them.
"""
import torch
import torch.nn.functional as F

import reference
import spec
from reference import causal_conv3d, residual_block


def stem(x, W, caches):
    x, caches["decoder.conv_in"] = causal_conv3d(x, W["decoder.conv_in.weight"], W["decoder.conv_in.bias"],
                                                 caches["decoder.conv_in"])
    x = residual_block(x, W, "decoder.mid_block.resnets.0", caches)
    x = reference.attention_block(x, W, "decoder.mid_block.attentions.0")
    return residual_block(x, W, "decoder.mid_block.resnets.1", caches)


def up_block(x, W, i, caches, geometry):
    return reference.up_block(x, W, i, caches, False, geometry)


def head(x, W, caches):
    x = F.silu(reference.rms_norm(x, W["decoder.norm_out.gamma"]))
    y, caches["decoder.conv_out"] = causal_conv3d(x, W["decoder.conv_out.weight"], W["decoder.conv_out.bias"],
                                                  caches["decoder.conv_out"])
    return y


stem_compiled = torch.compile(stem, dynamic=False)
up_block_compiled = torch.compile(up_block, dynamic=False)
head_compiled = torch.compile(head, dynamic=False)


def decode_frame(x, W, caches, geometry):
    x = stem_compiled(x, W, caches)
    for i in range(len(geometry.up_blocks)):
        x = up_block_compiled(x, W, i, caches, geometry)
    return head_compiled(x, W, caches)


def decode(z, weights, out):
    W, g = reference.named_weights(weights, z)
    x, _ = causal_conv3d(z, W["post_quant_conv.weight"], W["post_quant_conv.bias"], None)
    caches = {}
    y = reference.decoder(x[:, :, :1], W, caches, True, g)
    out[:, :, :1] = reference.unpatchify(y).clamp(-1.0, 1.0)
    for name, cache in caches.items():
        if cache.shape[2] < spec.CACHE_T:
            caches[name] = torch.cat([torch.zeros_like(cache), cache], 2)
    done = 1
    for i in range(1, z.shape[2]):
        # contiguous inputs, so that the graphs' stride guards hold for every frame and every clip length
        caches = {name: cache.contiguous() for name, cache in caches.items()}
        y = decode_frame(x[:, :, i:i + 1].contiguous(), W, caches, g)
        out[:, :, done:done + 4] = reference.unpatchify(y).clamp(-1.0, 1.0)
        done += 4


@torch.inference_mode()
def prepare(weights, rank, world, pg):
    if rank == 0:
        g = spec.geometry_of(weights)
        z = weights[0].new_zeros(1, g.latent_channels, 2, *g.latent_hw)
        out = weights[0].new_empty(1, 3, spec.frames(2), *g.video_hw)
        decode(z, weights, out)
    return weights


@torch.inference_mode()
def run(z, weights, rank, world, pg, out):
    if rank == 0:
        decode(z, weights, out)
