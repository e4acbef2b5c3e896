"""Honest pattern: a plain PyTorch nn.Module tree (vae.py, in the style of Wan2.2's `vae2_2.py`, with `feat_cache`
lists and `feat_idx=[0]` mutable default arguments that every caller passes), built inside run() from the given bf16
weights and run one latent frame at a time.

The tree is made on the meta device (no memory, no init) and the weights are assigned by name, without a copy.
Activations are bf16 like the weights; the RMS norms take their statistics in fp32.
"""
import torch

import spec

from .vae import WanVAEDecoder, unpatchify


def build_decoder(weights):
    g = spec.geometry_of(weights)
    with torch.device("meta"):
        model = WanVAEDecoder(z_dim=g.latent_channels, dim=g.base_dim)
    state = {name: w for (name, _), w in zip(spec.weight_list(g), weights)}
    model.load_state_dict(state, strict=True, assign=True)
    return model.eval()


@torch.inference_mode()
def run(z, weights, rank, world, pg, out):
    if rank != 0:
        return
    model = build_decoder(weights)
    done = 0
    for y in model.decode(z):
        n = y.shape[2]
        out[:, :, done:done + n] = unpatchify(y, spec.PATCH).clamp_(-1.0, 1.0)
        done += n
