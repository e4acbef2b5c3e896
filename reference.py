"""The definition of the result: the Wan2.2 VAE decode in plain PyTorch, op by op, named after the weights.

`decode(z, weights)` equals diffusers' `AutoencoderKLWan._decode` (0.42.1) bit for bit in fp32 on the CPU, for any
geometry of this architecture (widths, latent channels, latent size and T read from the tensors). It computes in
the dtype of its inputs. `decode_bf16` is the release's bf16 decode (bf16 weights under bf16 autocast, latents
rounded to bf16), and `run`/`prepare` make this module a solution computing it on rank 0.

Bit-exactness comes from calling the same ops on the same shapes as diffusers: one latent frame per decoder call,
caches concatenated in front, the same F.pad amounts, F.normalize for the RMS norm, SDPA for the attention. A
mathematically equal rewrite (all frames at once, fused norm scales) is not bit-equal.

`decode_fp32`, the task's fp32 reference (what the data maker stores), differs from `decode` in fp32 in two places
(`band_exact`), both so that a band of the image (data/bands.py) rounds as the whole does, bit for bit: its RMS norms
sum the squares over the channels in a fixed pairwise order (`channel_norm`; GPU reductions choose their order from
the tensor's shape), and the resample's 3x3 conv2d runs as a conv3d of depth 1, the same sums (for some shapes
cuDNN's 2d path takes an fp32 algorithm that rounds another way, and only where its large workspace fits).

The causal caches are explicit: `caches` maps a conv's name to the input frames it keeps from the previous
chunk (at most CACHE_T, taken before padding). A name that is absent means no chunk came before.
"""
import contextlib
import os
import threading

import torch
import torch.nn.functional as F

import spec

CACHE_T = spec.CACHE_T

# Named scopes (torch.profiler record_function and NVTX ranges) named after the weights, for traces. Off by default,
# and then `scope` returns one shared null context: no profiler call, no allocation. WAN_SCOPES=1 in the
# environment (bench.py --profile sets it) or set_scopes(True) turns them on.
_SCOPES = os.environ.get("WAN_SCOPES") == "1"
_NULL = contextlib.nullcontext()


def set_scopes(on):
    global _SCOPES
    _SCOPES = bool(on)


@contextlib.contextmanager
def _named(name):
    nvtx = torch.cuda.is_available() and torch.cuda.is_initialized()
    if nvtx:
        torch.cuda.nvtx.range_push(name)
    try:
        with torch.profiler.record_function(name):
            yield
    finally:
        if nvtx:
            torch.cuda.nvtx.range_pop()


def scope(name):
    """A named scope around a part of the decode, e.g. scope("decoder/mid_block/resnets.0/conv1")."""
    return _named(name) if _SCOPES else _NULL


def _path(name):
    """A weight prefix as a scope path: decoder.mid_block.resnets.0 -> decoder/mid_block/resnets.0."""
    parts = name.split(".")
    out = []
    for p in parts:
        if p.isdigit() and out:
            out[-1] += f".{p}"
        else:
            out.append(p)
    return "/".join(out)


# Set by decode_fp32 (band_exact) for its own thread only: the data maker's CPU workers are threads, and one's
# decode_fp32 must not change another's decode.
_THREAD = threading.local()


@contextlib.contextmanager
def band_exact():
    """rms_norm sums in a fixed order and upsampler's conv2d runs as a conv3d, in this thread, restored on exit."""
    saved, _THREAD.band_exact = _band_exact(), True
    try:
        yield
    finally:
        _THREAD.band_exact = saved


def _band_exact():
    return getattr(_THREAD, "band_exact", False)


@contextlib.contextmanager
def fp32_exact():
    """TF32 off for convolutions and matmuls (the task's fp32 reference), restored on exit."""
    saved = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def channel_norm(x):
    """The 2-norm over dim 1, summed in a fixed order: the channels' squares halved and added elementwise until one
    is left (an odd one out is added to the first), so every position's bits are independent of the other dims."""
    s = x * x
    while s.shape[1] > 1:
        h = s.shape[1] // 2
        odd = s[:, 2 * h:]
        s = s[:, :h] + s[:, h:2 * h]
        if odd.shape[1]:
            s[:, :1] += odd
    return s.sqrt()


def rms_norm(x, gamma):
    """WanRMS_norm over dim 1: F.normalize (in fp32 for 16-bit inputs, diffusers >= 0.38), then x sqrt(C), x gamma,
    + 0.0, in that order (fusing the two scales changes the bits). Under band_exact the norm is channel_norm,
    clamped and divided as F.normalize does."""
    wide = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    if _band_exact():
        n = (wide / channel_norm(wide).clamp_min(1e-12)).to(x.dtype)
    else:
        n = F.normalize(wide, dim=1).to(x.dtype)
    return n * (x.shape[1] ** 0.5) * gamma + 0.0


def causal_conv3d(x, weight, bias, cache):
    """A causal conv over (B, C, t, H, W): `cache` frames (or zeros, 2 frames without a cache) in front in time,
    zeros around in space. Returns (y, new cache): the last CACHE_T input frames, topped up from the old cache."""
    new = x[:, :, -CACHE_T:].clone()
    if new.shape[2] < CACHE_T and cache is not None:
        new = torch.cat([cache[:, :, -1:], new], 2)
    kt, kh, kw = weight.shape[2:]
    pad = [kw // 2, kw // 2, kh // 2, kh // 2, kt - 1, 0]
    if cache is not None and pad[4] > 0:
        x = torch.cat([cache, x], 2)
        pad[4] -= cache.shape[2]
    y = F.conv3d(F.pad(x, pad), weight, bias)
    return y, new


def residual_block(x, W, name, caches):
    """x + main path, or conv_shortcut(x) + main path when the block changes the channel count."""
    path = _path(name)
    with scope(path):
        if f"{name}.conv_shortcut.weight" in W:
            with scope(f"{path}/conv_shortcut"):
                h, _ = causal_conv3d(x, W[f"{name}.conv_shortcut.weight"], W[f"{name}.conv_shortcut.bias"], None)
        else:
            h = x
        with scope(f"{path}/norm1"):
            x = F.silu(rms_norm(x, W[f"{name}.norm1.gamma"]))
        with scope(f"{path}/conv1"):
            x, caches[f"{name}.conv1"] = causal_conv3d(x, W[f"{name}.conv1.weight"], W[f"{name}.conv1.bias"],
                                                       caches.get(f"{name}.conv1"))
        with scope(f"{path}/norm2"):
            x = F.silu(rms_norm(x, W[f"{name}.norm2.gamma"]))
        with scope(f"{path}/conv2"):
            x, caches[f"{name}.conv2"] = causal_conv3d(x, W[f"{name}.conv2.weight"], W[f"{name}.conv2.bias"],
                                                       caches.get(f"{name}.conv2"))
        return x + h


def attention_block(x, W, name):
    """Single-head self-attention over the H x W positions of each frame, plus the identity."""
    path = _path(name)
    with scope(path):
        identity = x
        b, c, t, h, w = x.shape
        x = x.permute(0, 2, 1, 3, 4).reshape(b * t, c, h, w)          # (B, C, t, H, W) -> (B*t, C, H, W)
        with scope(f"{path}/norm"):
            x = rms_norm(x, W[f"{name}.norm.gamma"])
        with scope(f"{path}/to_qkv"):
            qkv = F.conv2d(x, W[f"{name}.to_qkv.weight"], W[f"{name}.to_qkv.bias"])
        qkv = qkv.reshape(b * t, 1, 3 * c, h * w)                     # (B*t, 1, 3C, HW)
        qkv = qkv.permute(0, 1, 3, 2).contiguous()                    # (B*t, 1, HW, 3C)
        q, k, v = qkv.chunk(3, dim=-1)                                # channels 0..C-1 are q, then k, then v
        with scope(f"{path}/attention"):
            x = F.scaled_dot_product_attention(q, k, v)               # (B*t, 1, HW, C)
        x = x.squeeze(1).permute(0, 2, 1).reshape(b * t, c, h, w)     # (B*t, C, H, W), channels-last strides
        with scope(f"{path}/proj"):
            x = F.conv2d(x, W[f"{name}.proj.weight"], W[f"{name}.proj.bias"])
        x = x.view(b, t, c, h, w).permute(0, 2, 1, 3, 4)              # (B*t, C, H, W) -> (B, C, t, H, W)
        return x + identity


def upsampler(x, W, name, caches, first, temporal):
    """The time conv (temporal blocks, C -> 2C interleaved into 2t frames), then per frame a nearest x2 upsample
    and a 3x3 conv2d.

    The first chunk skips the time conv (diffusers' "Rep" marker). The second runs it with two zero frames in
    front and keeps [0, x] as its cache: both are what a two-zero-frame cache gives, so that is what the first
    chunk stores, and the time conv is a plain causal conv over the frames after the first."""
    b, c, t, h, w = x.shape
    path = _path(name)
    if temporal:
        key = f"{name}.time_conv"
        if first:
            caches[key] = x.new_zeros(b, c, CACHE_T, h, w)
        else:
            with scope(f"{path}/time_conv"):
                x, caches[key] = causal_conv3d(x, W[f"{key}.weight"], W[f"{key}.bias"], caches[key])
                x = x.reshape(b, 2, c, t, h, w)                    # channels 0..C-1: frame 2t, C..2C-1: 2t+1
                x = torch.stack((x[:, 0], x[:, 1]), 3)             # (B, C, t, 2, H, W)
                x = x.reshape(b, c, 2 * t, h, w)
    t = x.shape[2]
    with scope(f"{path}/resample"):
        x = x.permute(0, 2, 1, 3, 4).reshape(b * t, c, h, w)       # (B, C, t, H, W) -> (B*t, C, H, W)
        x = F.interpolate(x.float(), scale_factor=(2.0, 2.0), mode="nearest-exact").type_as(x)
        weight, bias = W[f"{name}.resample.1.weight"], W[f"{name}.resample.1.bias"]
        if _band_exact():
            x = F.conv3d(x.unsqueeze(2), weight.unsqueeze(2), bias, padding=(0, 1, 1)).squeeze(2)
        else:
            x = F.conv2d(x, weight, bias, padding=1)
    return x.view(b, t, x.shape[1], 2 * h, 2 * w).permute(0, 2, 1, 3, 4)  # -> (B, C, t, 2H, 2W)


def avg_shortcut(x, out_channels, temporal, first):
    """diffusers' DupUp3D: the up block's input repeated to (out_channels, t x ft, 2H, 2W) with no arithmetic;
    output (o, t*ft + a, 2y + i, 2x + j) is input channel (((o*ft + a)*2 + i)*2 + j) // r. The first chunk keeps
    only the last of its ft time copies."""
    b, c, t, h, w = x.shape
    ft = 2 if temporal else 1
    r = out_channels * ft * 4 // c
    x = x.repeat_interleave(r, dim=1)
    x = x.view(b, out_channels, ft, 2, 2, t, h, w)
    x = x.permute(0, 1, 5, 2, 6, 3, 7, 4).contiguous()             # (B, Co, t, ft, H, 2, W, 2)
    x = x.view(b, out_channels, t * ft, 2 * h, 2 * w)
    return x[:, :, ft - 1:] if first else x


def up_block(x, W, i, caches, first, geometry):
    cin, cout, temporal, spatial = geometry.up_blocks[i]
    x_in = x
    for j in range(spec.RESNETS_PER_UP_BLOCK):
        x = residual_block(x, W, f"decoder.up_blocks.{i}.resnets.{j}", caches)
    if spatial:
        with scope(f"decoder/up_blocks.{i}/upsampler"):
            x = upsampler(x, W, f"decoder.up_blocks.{i}.upsampler", caches, first, temporal)
        with scope(f"decoder/up_blocks.{i}/avg_shortcut"):
            x = x + avg_shortcut(x_in, cout, temporal, first)
    return x


def _whole(x, stage):
    return x


def decoder(x, W, caches, first, geometry, cut=_whole):
    """One latent frame (B, z, 1, h, w) -> decoder output (B, 12, 1 or 4, 8h, 8w); updates `caches`.

    `cut(x, stage)` may narrow the activations between stages (data/bands.py decodes a band of the video so): stage 0
    is after the attention, 1 to 4 before up block 0 to 3, 5 before norm_out, 6 after conv_out."""
    with scope("decoder/conv_in"):
        x, caches["decoder.conv_in"] = causal_conv3d(x, W["decoder.conv_in.weight"], W["decoder.conv_in.bias"],
                                                     caches.get("decoder.conv_in"))
    with scope("decoder/mid_block"):
        x = residual_block(x, W, "decoder.mid_block.resnets.0", caches)
        x = attention_block(x, W, "decoder.mid_block.attentions.0")
        x = cut(x, 0)
        x = residual_block(x, W, "decoder.mid_block.resnets.1", caches)
    for i in range(4):
        with scope(f"decoder/up_blocks.{i}"):
            x = up_block(cut(x, i + 1), W, i, caches, first, geometry)
    x = cut(x, 5)
    with scope("decoder/norm_out"):
        x = F.silu(rms_norm(x, W["decoder.norm_out.gamma"]))
    with scope("decoder/conv_out"):
        x, caches["decoder.conv_out"] = causal_conv3d(x, W["decoder.conv_out.weight"], W["decoder.conv_out.bias"],
                                                      caches.get("decoder.conv_out"))
    return cut(x, 6)


def unpatchify(x):
    """(B, 12, f, h, w) -> (B, 3, f, 2h, 2w): video[k, f, 2y + i, 2x + j] = channel 4k + 2j + i at (f, y, x)."""
    b, c, f, h, w = x.shape
    x = x.view(b, c // 4, spec.PATCH, spec.PATCH, f, h, w)          # (B, 3, j, i, f, h, w)
    x = x.permute(0, 1, 4, 5, 3, 6, 2)                              # (B, 3, f, h, i, w, j)
    return x.reshape(b, c // 4, f, h * spec.PATCH, w * spec.PATCH)


def named_weights(weights, z):
    """{name: tensor} for a weight list of any geometry of this architecture, checked, and that geometry."""
    g = spec.geometry_of(weights)
    g = spec.Geometry(g.name, g.latent_channels, tuple(z.shape[3:]), g.base_dim)
    spec.check_weights(weights, g)
    if z.dim() != 5 or z.shape[1] != g.latent_channels:
        raise ValueError(f"z is {list(z.shape)}, expected [B, {g.latent_channels}, T, h, w]")
    return {name: t for (name, _), t in zip(spec.weight_list(g), weights)}, g


def decode(z, weights, out=None, progress=None, cut=None):
    """Latents z (B, C, T, h, w) -> video (B, 3, 4T-3, 16h, 16w) in [-1, 1], in z's dtype.

    Frames go straight into `out` (allocated when not given), so no growing concatenation holds two copies of the
    video. `progress(i, T)` is called after each latent frame. With `cut` (see decoder) `out` is the caller's, of the
    shape that the cut leaves."""
    W, g = named_weights(weights, z)
    b, _, t, h, w = z.shape
    shape = (b, 3, spec.frames(t), 16 * h, 16 * w)
    if out is None:
        if cut is not None:
            raise ValueError("a cut decode writes into the caller's out")
        out = torch.empty(shape, dtype=z.dtype, device=z.device)
    elif cut is None and tuple(out.shape) != shape:
        raise ValueError(f"out is {list(out.shape)}, expected {list(shape)}")
    with scope("post_quant_conv"):
        x, _ = causal_conv3d(z, W["post_quant_conv.weight"], W["post_quant_conv.bias"], None)  # all frames at once
    caches = {}
    done = 0
    for i in range(t):
        with scope("decoder"):
            y = decoder(x[:, :, i:i + 1], W, caches, i == 0, g, cut or _whole)
        n = y.shape[2]
        with scope("unpatchify"):
            out[:, :, done:done + n] = torch.clamp(unpatchify(y), min=-1.0, max=1.0)
        done += n
        if progress is not None:
            progress(i + 1, t)
    return out


def decode_bf16(z, weights, out=None, progress=None):
    """The release's bf16 decode: weights and latents rounded to bf16, under bf16 autocast."""
    z = z.to(torch.bfloat16)
    weights = [w.to(torch.bfloat16) for w in weights]
    with torch.autocast(device_type=z.device.type, dtype=torch.bfloat16):
        return decode(z, weights, out, progress)


def decode_fp32(z, weights, out=None, progress=None, cut=None):
    """The task's fp32 decode: fp32 latents and weights, TF32 off, band_exact."""
    with fp32_exact(), band_exact():
        return decode(z.float(), [w.float() for w in weights], out, progress, cut)


# The reference as a solution: rank 0 computes the release's bf16 decode into out, other ranks have nothing to do.

def run(z, weights, rank, world, pg, out):
    if rank == 0:
        decode_bf16(z, weights, out=out)
