"""The decode split over ranks by bands of rows (work in progress for issue 6's multi-GPU stage).

Every rank decodes the same frames but only its band of latent rows, and the matching band at every level (x2, x4,
x8 rows). Spatial 3x3 convolutions need one row from each neighbour: `halo` fetches it (zeros at the image's top
and bottom, which is the convolution's zero padding), and the convolution then pads only the columns. A causal
cache keeps the haloed input frames, so the time axis needs no communication. Norms, SiLU, the time convs, the 1x1
convs and the DupUp shortcut are per position; the mid block's attention gathers every rank's keys and values.
Rank 0 gathers the video bands into `out`. Same arithmetic as the reference, other shapes: equal within rounding.
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

import reference
from reference import CACHE_T


class Band:
    """This rank's rows of the latent grid: [r0, r1) of `rows`, equal bands (rows divisible by world)."""

    def __init__(self, rank, world, pg, rows):
        if rows % world:
            raise ValueError(f"{rows} latent rows do not split into {world} equal bands")
        self.rank, self.world, self.pg = rank, world, pg
        self.rows = rows // world

    def halo(self, x):
        """x (..., h, W) -> (..., h + 2, W): a row from each neighbour, zeros beyond the image."""
        if self.world == 1:
            return F.pad(x, (0, 0, 1, 1))
        above = x.new_zeros(x[..., :1, :].shape)   # contiguous: the receive buffers
        below = x.new_zeros(x[..., :1, :].shape)
        ops = []
        if self.rank > 0:
            ops += [dist.P2POp(dist.isend, x[..., :1, :].contiguous(), self.rank - 1, self.pg),
                    dist.P2POp(dist.irecv, above, self.rank - 1, self.pg)]
        if self.rank < self.world - 1:
            ops += [dist.P2POp(dist.isend, x[..., -1:, :].contiguous(), self.rank + 1, self.pg),
                    dist.P2POp(dist.irecv, below, self.rank + 1, self.pg)]
        for req in dist.batch_isend_irecv(ops):
            req.wait()
        return torch.cat([above, x, below], -2)

    def gather_rows(self, x):
        """Every rank's x (..., h, W) concatenated along the rows, in rank order, on every rank."""
        if self.world == 1:
            return x
        parts = [torch.empty_like(x) for _ in range(self.world)]
        dist.all_gather(parts, x.contiguous(), group=self.pg)
        return torch.cat(parts, -2)


def conv3d(x, weight, bias, cache, band):
    """reference.causal_conv3d on a band: the rows come haloed, so only time (causally) and columns are padded."""
    kt, kh, kw = weight.shape[2:]
    if kh == 1:
        return reference.causal_conv3d(x, weight, bias, cache)
    x = band.halo(x)
    new = x[:, :, -CACHE_T:].clone()
    if new.shape[2] < CACHE_T and cache is not None:
        new = torch.cat([cache[:, :, -1:], new], 2)
    front = kt - 1
    if cache is not None:
        x = torch.cat([cache, x], 2)
        front -= cache.shape[2]
    return F.conv3d(F.pad(x, [kw // 2, kw // 2, 0, 0, front, 0]), weight, bias), new


def residual_block(x, W, name, caches, band):
    if f"{name}.conv_shortcut.weight" in W:
        h, _ = conv3d(x, W[f"{name}.conv_shortcut.weight"], W[f"{name}.conv_shortcut.bias"], None, band)
    else:
        h = x
    for norm, conv in (("norm1", "conv1"), ("norm2", "conv2")):
        x = F.silu(reference.rms_norm(x, W[f"{name}.{norm}.gamma"]))
        x, caches[f"{name}.{conv}"] = conv3d(x, W[f"{name}.{conv}.weight"], W[f"{name}.{conv}.bias"],
                                             caches.get(f"{name}.{conv}"), band)
    return x + h


def attention_block(x, W, name, band):
    """Queries of this band against the keys and values of every band."""
    identity = x
    b, c, t, h, w = x.shape
    x = x.permute(0, 2, 1, 3, 4).reshape(b * t, c, h, w)
    x = reference.rms_norm(x, W[f"{name}.norm.gamma"])
    qkv = F.conv2d(x, W[f"{name}.to_qkv.weight"], W[f"{name}.to_qkv.bias"])        # (B*t, 3C, h, W)
    q = qkv[:, :c].flatten(2).transpose(1, 2).unsqueeze(1)                         # (B*t, 1, hW, C)
    kv = band.gather_rows(qkv[:, c:].contiguous())                                 # (B*t, 2C, H, W)
    k = kv[:, :c].flatten(2).transpose(1, 2).unsqueeze(1)
    v = kv[:, c:].flatten(2).transpose(1, 2).unsqueeze(1)
    x = F.scaled_dot_product_attention(q, k, v)                                    # (B*t, 1, hW, C)
    x = x.squeeze(1).transpose(1, 2).reshape(b * t, c, h, w)
    x = F.conv2d(x, W[f"{name}.proj.weight"], W[f"{name}.proj.bias"])
    return x.view(b, t, c, h, w).permute(0, 2, 1, 3, 4) + identity


def upsampler(x, W, name, caches, first, temporal, band):
    b, c, t, h, w = x.shape
    if temporal:
        key = f"{name}.time_conv"
        if first:
            caches[key] = x.new_zeros(b, c, CACHE_T, h, w)
        else:
            x, caches[key] = reference.causal_conv3d(x, W[f"{key}.weight"], W[f"{key}.bias"], caches[key])
            x = torch.stack((x[:, :c], x[:, c:]), 3).reshape(b, c, 2 * t, h, w)    # frame 2t, then 2t + 1
    t = x.shape[2]
    x = band.halo(x.permute(0, 2, 1, 3, 4).reshape(b * t, c, h, w))               # (B*t, C, h + 2, W)
    x = F.interpolate(x, scale_factor=(2.0, 2.0), mode="nearest")[:, :, 1:-1]     # one upsampled row each side
    x = F.conv2d(F.pad(x, (1, 1, 0, 0)), W[f"{name}.resample.1.weight"], W[f"{name}.resample.1.bias"])
    return x.view(b, t, x.shape[1], 2 * h, 2 * w).permute(0, 2, 1, 3, 4)


def decoder(x, W, caches, first, geometry, band):
    """reference.decoder on this rank's band of rows."""
    x, caches["decoder.conv_in"] = conv3d(x, W["decoder.conv_in.weight"], W["decoder.conv_in.bias"],
                                          caches.get("decoder.conv_in"), band)
    x = residual_block(x, W, "decoder.mid_block.resnets.0", caches, band)
    x = attention_block(x, W, "decoder.mid_block.attentions.0", band)
    x = residual_block(x, W, "decoder.mid_block.resnets.1", caches, band)
    for i, (cin, cout, temporal, spatial) in enumerate(geometry.up_blocks):
        x_in = x
        for j in range(3):
            x = residual_block(x, W, f"decoder.up_blocks.{i}.resnets.{j}", caches, band)
        if spatial:
            x = upsampler(x, W, f"decoder.up_blocks.{i}.upsampler", caches, first, temporal, band)
            x = x + reference.avg_shortcut(x_in, cout, temporal, first)
    x = F.silu(reference.rms_norm(x, W["decoder.norm_out.gamma"]))
    x, caches["decoder.conv_out"] = conv3d(x, W["decoder.conv_out.weight"], W["decoder.conv_out.bias"],
                                           caches.get("decoder.conv_out"), band)
    return x
