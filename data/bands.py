"""Bands of the fp32 decode, each computed alone: the rows (or columns) of the video from one range of latent rows
(columns), equal to the same rows of the whole decode within fp32 rounding, with no communication between bands.

What a band must compute (its receptive field): up to the mid block's attention every position of a frame can reach
every other (the attention mixes them all), so a band computes that part whole (conv_in, the mid block's first
resnet, the attention: 0.7% of the FLOPs). After it every op is local: a 3x3 conv needs one row beyond each side of
its output at its level, a nearest x2 upsample half the rows below it, the norms, SiLU, time convs, 1x1 convs and
the DupUp shortcut nothing beyond. Between the stages of reference.decoder (its `cut` points) the band keeps the
span that the rest of the decode needs for its own output (`spans`, computed backwards from the band). Inside a stage
the convs pad the span's cut edges with zeros, which is wrong, but only in rows that the next cut drops: each 3x3
conv spoils one more row at each cut edge, and the span is wider than what follows needs by exactly that. At the
image's own edges a span stops at the edge, where the zero padding is the decode's own. The causal caches are of the
same spans in every latent frame, so time adds nothing. The up block's shortcut (DupUp) needs at the block's input
half the rows that its upsampler's output needs, less than its resnets' halo asks for.

A band's convs run on other shapes than the whole decode's, so its values can differ within fp32 rounding (the
algorithms and their summation orders may depend on the shape); one band covering the image is the whole decode,
bit for bit (no cut). The halo costs FLOPs: `flops` counts a band's work as spec.flops_by_weight counts the
decode's, each conv over the span it computes. The halo is the same number of latent rows or columns either way
(15 at the latent level), so bands across the longer side (columns, 78 of them) cost less than across the rows (44).
"""
import dataclasses

import torch

import reference
import spec

ROWS, COLUMNS = 3, 4      # the axis of a band in (B, C, T, H, W) tensors
STAGES = 7                # reference.decoder's cut stages 0..6
# reference.decoder's stage of a conv (by weight name prefix): the span it computes over; absent: the whole frame.
_STAGE_OF = (("decoder.mid_block.resnets.1.", 0), ("decoder.up_blocks.0.", 1), ("decoder.up_blocks.1.", 2),
             ("decoder.up_blocks.2.", 3), ("decoder.up_blocks.3.", 4), ("decoder.conv_out.", 5))


@dataclasses.dataclass(frozen=True)
class Band:
    """Latent rows (axis ROWS) or columns (COLUMNS) [lo, hi) of `extent`: the video's [16 lo, 16 hi)."""
    axis: int
    lo: int
    hi: int
    extent: int

    @property
    def whole(self):
        return (self.lo, self.hi) == (0, self.extent)

    def label(self):
        return "" if self.whole else f"{'rows' if self.axis == ROWS else 'cols'} {self.lo}-{self.hi}"

    def of(self, video):
        """This band of a video (B, 3, F, 16h, 16w) laid out whole: a view."""
        scale = video.shape[self.axis] // self.extent
        return video.narrow(self.axis, self.lo * scale, (self.hi - self.lo) * scale)


@dataclasses.dataclass(frozen=True)
class Tile:
    """A rectangle of the video: the latent rows of one Band (axis ROWS) by the columns of another (COLUMNS). Its
    decode narrows both axes at every stage, so its halo is the band's on each side of both."""
    rows: Band
    cols: Band

    def __post_init__(self):
        if (self.rows.axis, self.cols.axis) != (ROWS, COLUMNS):
            raise ValueError("a tile is a band of rows by a band of columns")

    @property
    def whole(self):
        return self.rows.whole and self.cols.whole

    def label(self):
        """Where it is in the video, in pixels (16 per latent row or column)."""
        r, c = self.rows, self.cols
        return f"rows {16 * r.lo}-{16 * r.hi}, columns {16 * c.lo}-{16 * c.hi} of the video"

    def of(self, video):
        return self.cols.of(self.rows.of(video))


def _bands(region):
    return (region.rows, region.cols) if isinstance(region, Tile) else (region,)


def split(extent, n, axis=COLUMNS):
    """n bands of nearly equal size covering [0, extent) along axis."""
    if not 1 <= n <= extent:
        raise ValueError(f"cannot split {extent} latent rows or columns into {n} bands")
    edges = [k * extent // n for k in range(n + 1)]
    return [Band(axis, edges[k], edges[k + 1], extent) for k in range(n)]


def stage_ops(geometry):
    """The spatial ops between cut stage k and k + 1 of reference.decoder, in order: 1 for a 3x3 conv (one row of
    halo at its level), 2 for a nearest x2 upsample (the level doubles)."""
    resnet = (1, 1)
    ops = [resnet]                                        # 0 -> 1: the mid block's second resnet
    for _, _, _, spatial in geometry.up_blocks:           # 1..4 -> next: an up block's resnets, then its upsampler
        ops.append(resnet * spec.RESNETS_PER_UP_BLOCK + ((2, 1) if spatial else ()))
    ops.append((1,))                                      # 5 -> 6: norm_out, conv_out
    return ops


def _levels(extent, geometry):
    """The extent at each stage's level: the latent grid's at stage 0, doubled by each upsample."""
    out = [extent]
    for ops in stage_ops(geometry):
        out.append(out[-1] * (2 if 2 in ops else 1))
    return out


def spans(band, geometry):
    """[(start, stop)] per stage 0..6 at that stage's level: what the band keeps there. Stage 6 is the band itself
    (conv_out's output, 8 rows per latent row); each earlier span is what the ops after it need, clipped to the
    image."""
    levels = _levels(band.extent, geometry)
    scale = levels[-1] // band.extent
    a, b = band.lo * scale, band.hi * scale
    out = [(a, b)]
    for k in reversed(range(STAGES - 1)):
        size = levels[k + 1]
        for op in reversed(stage_ops(geometry)[k]):
            if op == 1:
                a, b = max(a - 1, 0), min(b + 1, size)
            else:
                a, b, size = a // 2, -(-b // 2), size // 2
        out.append((a, b))
    return out[::-1]


class Cut:
    """reference.decode's `cut` for one band: narrows the activations to the band's span at each stage."""

    def __init__(self, band, geometry):
        self.axis, self.spans = band.axis, spans(band, geometry)
        levels = _levels(band.extent, geometry)
        # where the tensor that arrives at stage k starts (its first row at that level) and how long it is
        self.base, self.arriving = [0], [band.extent]
        for k in range(1, STAGES):
            factor = levels[k] // levels[k - 1]
            self.base.append(self.spans[k - 1][0] * factor)
            self.arriving.append((self.spans[k - 1][1] - self.spans[k - 1][0]) * factor)

    def __call__(self, x, stage):
        if x.shape[self.axis] != self.arriving[stage]:
            raise RuntimeError(f"stage {stage}: {x.shape[self.axis]} rows arrived, expected {self.arriving[stage]}: "
                               f"reference.decoder's stages and data/bands.py's stage_ops disagree")
        start, stop = self.spans[stage]
        if (start - self.base[stage], stop - start) == (0, x.shape[self.axis]):
            return x
        return x.narrow(self.axis, start - self.base[stage], stop - start).contiguous()


def flops(latent_frames, region, geometry=spec.FULL):
    """FLOPs of the decode of a band or a tile over `latent_frames` latent frames, counted as spec.flops_by_weight
    counts the whole decode, each conv over the span it computes on each axis (halo included)."""
    if region.whole:
        return spec.decode_flops(latent_frames, geometry)
    parts = [(spans(b, geometry), _levels(b.extent, geometry)) for b in _bands(region)]
    total = 0.0
    for name, count in spec.flops_by_weight(latent_frames, geometry).items():
        k = next((k for prefix, k in _STAGE_OF if name.startswith(prefix)), None)
        if k is not None:
            for sp, levels in parts:
                count *= (sp[k][1] - sp[k][0]) / levels[k]
        total += count
    return total


def decode(z, weights, region, out, progress=None):
    """The fp32 decode (TF32 off) of a band or a tile: writes `out`, its video (B, 3, 4T-3, ...) (region.of(video)
    of a whole one, or a tensor of its own; on any device)."""
    geometry = reference.named_weights(weights, z)[1]
    cuts = [Cut(b, geometry) for b in _bands(region) if not b.whole]
    if not cuts:
        cut = None
    elif len(cuts) == 1:
        cut = cuts[0]
    else:
        def cut(x, stage):
            return cuts[1](cuts[0](x, stage), stage)
    return reference.decode_fp32(z, weights, out=out, progress=progress, cut=cut)


def tolerance(video):
    """How far a band's values may be from the whole decode's: 2^6 fp32 epsilons of the video's scale (its largest
    magnitude, at most 1 after the clamp). The convs' summation orders differ with their shapes, and the rounding
    differences grow through the decoder's ~40 layers: up to 1.4e-6 measured on the CPU (tests/data/test_data_split.py),
    5 times below this bound."""
    scale = video.abs().max().item() if video.numel() else 0.0
    return 2 ** 6 * torch.finfo(torch.float32).eps * scale
