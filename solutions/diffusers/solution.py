"""diffusers' own AutoencoderKLWan decode in bf16, as users run it today, fed the task's weights.

Rank 0 wraps the given bf16 tensors in diffusers' module tree (built on the meta device each call, so nothing
outlives a call) and runs `_decode` under bf16 autocast; the video is copied into out. diffusers is an optional
dependency: without it, importing this solution fails with a message saying so.
"""
import torch

import spec

try:
    from diffusers import AutoencoderKLWan
except ImportError as e:  # the harness reports this as the solution's load error
    raise ImportError("solutions/diffusers needs the optional dependency diffusers (pip install diffusers)") from e


def model(weights):
    g = spec.geometry_of(weights)
    with torch.device("meta"):
        vae = AutoencoderKLWan(base_dim=160, decoder_base_dim=g.base_dim, z_dim=g.latent_channels,
                               dim_mult=[1, 2, 4, 4], num_res_blocks=2, temperal_downsample=[False, True, True],
                               is_residual=True, in_channels=12, out_channels=12, patch_size=2)
    state = {name: w for (name, _), w in zip(spec.weight_list(g), weights)}
    vae.load_state_dict(state, strict=False, assign=True)   # the encoder stays on meta: decode never touches it
    return vae.eval()


def run(z, weights, rank, world, pg, out):
    if rank != 0:
        return
    vae = model(weights)
    with torch.no_grad(), torch.autocast(device_type=z.device.type, dtype=torch.bfloat16):
        out.copy_(vae.decode(z).sample)
