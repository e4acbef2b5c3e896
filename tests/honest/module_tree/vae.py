"""The Wan2.2 VAE decoder as an nn.Module tree, after the published `vae2_2.py`.

The classes follow Wan2.2's own (CausalConv3d, RMS_norm, Resample, ResidualBlock, AttentionBlock, DupUp3D,
Up_ResidualBlock, Decoder3d); the attribute names follow diffusers' `AutoencoderKLWan`, so `state_dict()` keys are the
names of spec.weight_list and the given weights load by name.

The causal caches work as in Wan2.2: `feat_cache` is a list with a slot per cached conv, and `feat_idx` is a
one-element list, the next slot, that every module advances as it goes.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

CACHE_T = 2


class CausalConv3d(nn.Conv3d):
    """A conv3d padded with zeros in front in time only (or with the cached frames of the previous chunk)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._padding = (self.padding[2], self.padding[2], self.padding[1], self.padding[1], 2 * self.padding[0], 0)
        self.padding = (0, 0, 0)

    def forward(self, x, cache_x=None):
        padding = list(self._padding)
        if cache_x is not None and self._padding[4] > 0:
            x = torch.cat([cache_x, x], dim=2)
            padding[4] -= cache_x.shape[2]
        x = F.pad(x, padding)
        return super().forward(x)


def cached_call(conv, x, feat_cache, feat_idx=[0]):
    """Run `conv` on x with the cache in slot feat_idx[0]; keep x's last CACHE_T frames there for the next chunk."""
    idx = feat_idx[0]
    cache_x = x[:, :, -CACHE_T:].clone()
    if cache_x.shape[2] < 2 and feat_cache[idx] is not None:
        # one new frame: keep the last cached one in front of it
        cache_x = torch.cat([feat_cache[idx][:, :, -1:], cache_x], dim=2)
    x = conv(x, feat_cache[idx])
    feat_cache[idx] = cache_x
    feat_idx[0] += 1
    return x


class RMS_norm(nn.Module):
    """x / ||x|| over the channels (in fp32) x sqrt(C) x gamma."""

    def __init__(self, dim, channel_first=True, images=True, bias=False):
        super().__init__()
        broadcastable_dims = (1, 1) if images else (1, 1, 1)
        shape = (dim, *broadcastable_dims) if channel_first else (dim,)
        self.channel_first = channel_first
        self.scale = dim ** 0.5
        self.gamma = nn.Parameter(torch.ones(shape))
        self.bias = nn.Parameter(torch.zeros(shape)) if bias else 0.0

    def forward(self, x):
        n = F.normalize(x.float(), dim=(1 if self.channel_first else -1)).type_as(x)
        return n * self.scale * self.gamma + self.bias


class Upsample(nn.Upsample):
    """nearest-exact upsampling, done in fp32 (it only copies)."""

    def forward(self, x):
        return super().forward(x.float()).type_as(x)


class Resample(nn.Module):
    """upsample2d: x2 nearest + 3x3 conv per frame. upsample3d: first a causal time conv C -> 2C that doubles the
    frames (skipped on the first chunk, which it marks "Rep")."""

    def __init__(self, dim, mode):
        super().__init__()
        assert mode in ("upsample2d", "upsample3d")
        self.dim, self.mode = dim, mode
        self.resample = nn.Sequential(Upsample(scale_factor=(2.0, 2.0), mode="nearest-exact"),
                                      nn.Conv2d(dim, dim, 3, padding=1))
        if mode == "upsample3d":
            self.time_conv = CausalConv3d(dim, dim * 2, (3, 1, 1), padding=(1, 0, 0))

    def forward(self, x, feat_cache=None, feat_idx=[0]):
        b, c, t, h, w = x.size()
        if self.mode == "upsample3d" and feat_cache is not None:
            idx = feat_idx[0]
            if feat_cache[idx] is None:
                # the first chunk: no time conv, one frame stays one frame
                feat_cache[idx] = "Rep"
                feat_idx[0] += 1
            else:
                cached = feat_cache[idx]
                cache_x = x[:, :, -CACHE_T:].clone()
                if cache_x.shape[2] < 2:
                    front = torch.zeros_like(cache_x) if isinstance(cached, str) else cached[:, :, -1:]
                    cache_x = torch.cat([front, cache_x], dim=2)
                if isinstance(cached, str):
                    x = self.time_conv(x)
                else:
                    x = self.time_conv(x, cached)
                feat_cache[idx] = cache_x
                feat_idx[0] += 1
                # channels 0..C-1 are frame 2t, C..2C-1 frame 2t+1
                x = x.reshape(b, 2, c, t, h, w)
                x = torch.stack((x[:, 0], x[:, 1]), 3)
                x = x.reshape(b, c, t * 2, h, w)
        t = x.shape[2]
        x = x.permute(0, 2, 1, 3, 4).reshape(b * t, c, h, w)
        x = self.resample(x)
        x = x.view(b, t, x.size(1), x.size(2), x.size(3)).permute(0, 2, 1, 3, 4)
        return x


class ResidualBlock(nn.Module):

    def __init__(self, in_dim, out_dim, dropout=0.0):
        super().__init__()
        self.norm1 = RMS_norm(in_dim, images=False)
        self.conv1 = CausalConv3d(in_dim, out_dim, 3, padding=1)
        self.norm2 = RMS_norm(out_dim, images=False)
        self.dropout = nn.Dropout(dropout)
        self.conv2 = CausalConv3d(out_dim, out_dim, 3, padding=1)
        self.conv_shortcut = CausalConv3d(in_dim, out_dim, 1) if in_dim != out_dim else nn.Identity()

    def forward(self, x, feat_cache=None, feat_idx=[0]):
        h = self.conv_shortcut(x)
        x = F.silu(self.norm1(x))
        x = cached_call(self.conv1, x, feat_cache, feat_idx) if feat_cache is not None else self.conv1(x)
        x = self.dropout(F.silu(self.norm2(x)))
        x = cached_call(self.conv2, x, feat_cache, feat_idx) if feat_cache is not None else self.conv2(x)
        return x + h


class AttentionBlock(nn.Module):
    """Single-head self-attention over the positions of each frame."""

    def __init__(self, dim):
        super().__init__()
        self.norm = RMS_norm(dim)
        self.to_qkv = nn.Conv2d(dim, dim * 3, 1)
        self.proj = nn.Conv2d(dim, dim, 1)

    def forward(self, x):
        identity = x
        b, c, t, h, w = x.size()
        x = x.permute(0, 2, 1, 3, 4).reshape(b * t, c, h, w)
        x = self.norm(x)
        q, k, v = self.to_qkv(x).reshape(b * t, 1, c * 3, -1).permute(0, 1, 3, 2).contiguous().chunk(3, dim=-1)
        x = F.scaled_dot_product_attention(q, k, v)
        x = x.squeeze(1).permute(0, 2, 1).reshape(b * t, c, h, w)
        x = self.proj(x)
        x = x.view(b, t, c, h, w).permute(0, 2, 1, 3, 4)
        return x + identity


class DupUp3D(nn.Module):
    """The parameter-free shortcut of an up block: its input's channels spread over time and 2 x 2 pixels."""

    def __init__(self, in_channels, out_channels, factor_t, factor_s=1):
        super().__init__()
        self.out_channels = out_channels
        self.factor_t, self.factor_s = factor_t, factor_s
        self.repeats = out_channels * factor_t * factor_s * factor_s // in_channels

    def forward(self, x, first_chunk=False):
        b, _, t, h, w = x.size()
        x = x.repeat_interleave(self.repeats, dim=1)
        x = x.view(b, self.out_channels, self.factor_t, self.factor_s, self.factor_s, t, h, w)
        x = x.permute(0, 1, 5, 2, 6, 3, 7, 4).contiguous()
        x = x.view(b, self.out_channels, t * self.factor_t, h * self.factor_s, w * self.factor_s)
        if first_chunk:
            x = x[:, :, self.factor_t - 1:]
        return x


class Up_ResidualBlock(nn.Module):

    def __init__(self, in_dim, out_dim, dropout, mult, temperal_upsample=False, up_flag=False):
        super().__init__()
        self.resnets = nn.ModuleList()
        for i in range(mult):
            self.resnets.append(ResidualBlock(in_dim if i == 0 else out_dim, out_dim, dropout))
        if up_flag:
            self.avg_shortcut = DupUp3D(in_dim, out_dim, factor_t=2 if temperal_upsample else 1, factor_s=2)
            self.upsampler = Resample(out_dim, mode="upsample3d" if temperal_upsample else "upsample2d")
        else:
            self.avg_shortcut = self.upsampler = None

    def forward(self, x, feat_cache=None, feat_idx=[0], first_chunk=False):
        x_main = x.clone()
        for resnet in self.resnets:
            x_main = resnet(x_main, feat_cache, feat_idx)
        if self.upsampler is None:
            return x_main
        x_main = self.upsampler(x_main, feat_cache, feat_idx)
        return x_main + self.avg_shortcut(x, first_chunk)


class MidBlock(nn.Module):

    def __init__(self, dim, dropout=0.0):
        super().__init__()
        self.attentions = nn.ModuleList([AttentionBlock(dim)])
        self.resnets = nn.ModuleList([ResidualBlock(dim, dim, dropout), ResidualBlock(dim, dim, dropout)])

    def forward(self, x, feat_cache=None, feat_idx=[0]):
        x = self.resnets[0](x, feat_cache, feat_idx)
        x = self.attentions[0](x)
        return self.resnets[1](x, feat_cache, feat_idx)


class Decoder3d(nn.Module):

    def __init__(self, dim=256, z_dim=48, dim_mult=(1, 2, 4, 4), num_res_blocks=2,
                 temperal_upsample=(True, True, False), dropout=0.0, out_channels=12):
        super().__init__()
        dims = [dim * u for u in [dim_mult[-1]] + list(dim_mult[::-1])]
        self.conv_in = CausalConv3d(z_dim, dims[0], 3, padding=1)
        self.mid_block = MidBlock(dims[0], dropout)
        self.up_blocks = nn.ModuleList()
        for i, (in_dim, out_dim) in enumerate(zip(dims[:-1], dims[1:])):
            t_up_flag = temperal_upsample[i] if i < len(temperal_upsample) else False
            self.up_blocks.append(Up_ResidualBlock(in_dim, out_dim, dropout, num_res_blocks + 1,
                                                   temperal_upsample=t_up_flag, up_flag=i != len(dim_mult) - 1))
        self.norm_out = RMS_norm(dims[-1], images=False)
        self.conv_out = CausalConv3d(dims[-1], out_channels, 3, padding=1)

    def forward(self, x, feat_cache=None, feat_idx=[0], first_chunk=False):
        x = cached_call(self.conv_in, x, feat_cache, feat_idx) if feat_cache is not None else self.conv_in(x)
        x = self.mid_block(x, feat_cache, feat_idx)
        for up_block in self.up_blocks:
            x = up_block(x, feat_cache, feat_idx, first_chunk)
        x = F.silu(self.norm_out(x))
        return cached_call(self.conv_out, x, feat_cache, feat_idx) if feat_cache is not None else self.conv_out(x)


def count_cached_convs(model):
    return sum(isinstance(m, CausalConv3d) for m in model.modules())


class WanVAEDecoder(nn.Module):
    """post_quant_conv + Decoder3d, decoding one latent frame at a time."""

    def __init__(self, z_dim=48, dim=256):
        super().__init__()
        self.post_quant_conv = CausalConv3d(z_dim, z_dim, 1)
        self.decoder = Decoder3d(dim=dim, z_dim=z_dim)

    def clear_cache(self):
        self._feat_map = [None] * count_cached_convs(self.decoder)
        self._conv_idx = [0]

    def decode(self, z):
        """Yields the decoder's output (B, 12, 1 or 4, 8h, 8w) for each latent frame in turn."""
        self.clear_cache()
        x = self.post_quant_conv(z)
        for i in range(z.shape[2]):
            self._conv_idx = [0]
            yield self.decoder(x[:, :, i:i + 1], feat_cache=self._feat_map, feat_idx=self._conv_idx,
                               first_chunk=(i == 0))
        self.clear_cache()


def unpatchify(x, patch_size=2):
    """(B, 3 * p * p, F, h, w) -> (B, 3, F, h * p, w * p); channel 4k + 2r + q is colour k at column offset r and row
    offset q ("b (c r q) f h w -> b c f (h q) (w r)")."""
    b, c, f, h, w = x.shape
    p = patch_size
    x = x.view(b, c // (p * p), p, p, f, h, w)
    x = x.permute(0, 1, 4, 5, 3, 6, 2)
    return x.reshape(b, c // (p * p), f, h * p, w * p)
