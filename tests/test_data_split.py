"""The fp32 decode split into bands (data/bands.py) against the whole decode.

The truth is the whole fp32 decode (reference.decode_fp32): a band's video must equal its rows of the whole decode
within fp32 rounding, and the spans each band keeps must be exactly the decode's receptive field, which autograd
finds independently (the rows of each stage's activations that the band's output depends on). Decodes that compare
values run single-threaded: MKL's multi-threaded GEMM splits a small product's reduction by its shape, so even the
whole decode on one thread and on two differs in 0.5% of its fp16 roundings (tiny geometry, f17); on one thread the
bands here equal the whole decode bit for bit.
"""
import pytest
import torch

import reference
import spec
from data import bands, synth

TINY = spec.TINY
TALL = spec.Geometry("tall", 8, (48, 2), 8)   # 48 latent rows: a middle band's halo stays inside at every stage
COLS, ROWS = bands.COLUMNS, bands.ROWS


@pytest.fixture
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


_cache = {}


def inputs(geometry, frames=3):
    """Seed 0's weights (rounded to bf16, as the data set ships them) and latents of a geometry, in fp32."""
    key = (geometry, frames)
    if key not in _cache:
        _cache[key] = ([w.to(torch.bfloat16).float() for w in synth.weights(geometry, 0)],
                       synth.latents(geometry, 0, "test", frames))
    return _cache[key]


def split_decode(geometry, n, axis):
    w, z = inputs(geometry)
    whole = reference.decode_fp32(z, w)
    video = torch.full_like(whole, float("nan"))
    for band in bands.split(geometry.latent_hw[axis - 3], n, axis):
        bands.decode(z, w, band, band.of(video))
    return whole, video


def test_one_band_is_the_whole_decode():
    """A band covering the frame is the plain reference decode, bit for bit (no cut at all)."""
    w, z = inputs(TINY, 2)
    video = torch.empty(1, 3, spec.frames(2), *TINY.video_hw)
    band, = bands.split(TINY.latent_hw[1], 1, COLS)
    bands.decode(z, w, band, band.of(video))
    assert torch.equal(video, reference.decode_fp32(z, w))


@pytest.mark.parametrize("geometry, n, axis", [
    (TINY, 2, COLS),    # 6 latent columns: every halo reaches both edges up to 4x, a real cut at 8x
    (TINY, 3, ROWS),    # an odd count, bands of unequal work (the middle one has two cut edges)
    (TALL, 3, ROWS),    # the middle band's spans are inside the frame at every stage
], ids=["tiny-cols-2", "tiny-rows-3", "tall-rows-3"])
def test_bands_equal_the_whole_decode(geometry, n, axis, one_thread):
    """Bands decoded alone and stitched equal the whole fp32 decode (T = 3: the first chunk, the time convs' first
    run, full caches) within bands.tolerance (2^6 fp32 epsilons of the video's scale, 1 here: 7.6e-6).

    Measured single-threaded: on the tiny geometry max|d| = 0 in both cases (bit-equal, so every fp16 rounding is
    identical, as asserted); on TALL max|d| = 9.5e-7 and 99.74% of the fp16 roundings identical (not asserted): up
    block 2's 16 -> 8 conv3d at 8x takes another CPU algorithm for a band's height than for the frame's (the
    activations before it are bit-equal), and fp32 differences near 1e-6 flip the fp16 rounding of a few tenths of a
    percent of the values. With two threads (MKL then splits the GEMMs by shape): tiny-cols-2 8.9e-7, tiny-rows-3
    6.6e-7, TALL 1.3e-6 (3 bands) and 1.4e-6 (2 bands).
    """
    whole, video = split_decode(geometry, n, axis)
    assert (whole - video).abs().max() <= bands.tolerance(whole) == 2 ** 6 * torch.finfo(torch.float32).eps
    if geometry is TINY:
        assert (whole.to(torch.float16) == video.to(torch.float16)).float().mean() >= 0.9999
    else:   # the case this geometry is here for: cut edges inside the frame at every stage
        levels = bands._levels(48, geometry)
        sp = bands.spans(bands.split(48, 3, axis)[1], geometry)
        assert all(0 < a and b < size for (a, b), size in zip(sp, levels)), sp


def receptive_fields(geometry, band):
    """Per stage 0..5 of reference.decoder, (first, stop) of the rows (band.axis) of its activations that the band's
    video depends on: autograd in fp64 through the whole (uncut) decode of one latent frame, each stage's activations
    given a zero addend whose gradient is theirs."""
    w, z = inputs(geometry, 1)
    addends = {}

    def probe(x, k):
        if k < 6:
            addends[k] = torch.zeros_like(x, requires_grad=True)
            return x + addends[k]
        return x

    out = torch.zeros(1, 3, 1, *geometry.video_hw, dtype=torch.float64)
    reference.decode(z.double(), [t.double() for t in w], out=out, cut=probe)
    band.of(out).sum().backward()
    fields = []
    for k in range(6):
        other = [d for d in range(5) if d != band.axis]
        rows = torch.nonzero(addends[k].grad.abs().sum(other) > 0).flatten().tolist()
        assert rows == list(range(rows[0], rows[-1] + 1))
        fields.append((rows[0], rows[-1] + 1))
    return fields


@pytest.mark.parametrize("geometry, band", [(TALL, bands.Band(ROWS, 16, 32, 48)), (TINY, bands.Band(ROWS, 0, 2, 4))],
                         ids=["tall-middle", "tiny-edge"])
def test_spans_are_the_receptive_field(geometry, band):
    """What a band keeps at each stage is exactly what its output depends on: no row less (the band would be wrong),
    no row more (wasted work). Autograd through the whole decode is the independent truth."""
    sp = bands.spans(band, geometry)
    assert sp[6] == (8 * band.lo, 8 * band.hi)
    assert receptive_fields(geometry, band) == sp[:6]


def conv_flops(fn):
    """The convolutions' FLOPs that fn() runs, as torch's FlopCounterMode counts them (2 per multiply-add, every
    output position at the full kernel: spec's convention)."""
    from torch.utils.flop_counter import FlopCounterMode
    with FlopCounterMode(display=False) as counter:
        fn()
    return sum(v for k, v in counter.get_flop_counts()["Global"].items() if "convolution" in str(k))


def test_band_flops_are_what_a_band_runs():
    """bands.flops (the plan's and the progress display's work) is what a band's decode runs: its convs as torch's
    FLOP counter counts them, plus the attention (spec's count; the counter leaves the CPU's attention out). The
    middle one of three row bands: two cut edges; T = 2: the time convs skip the first latent frame."""
    w, z = inputs(TINY, 2)
    band = bands.split(TINY.latent_hw[0], 3, ROWS)[1]
    out = band.of(torch.empty(1, 3, spec.frames(2), *TINY.video_hw))
    attention = spec.flops_by_weight(2, TINY)["attention"]
    assert conv_flops(lambda: bands.decode(z, w, band, out)) + attention == bands.flops(2, band, TINY)
    assert bands.flops(2, band, TINY) < spec.decode_flops(2, TINY)


def test_bands_across_columns_cost_less():
    """Two bands of f481's source compute 8.5% more than the whole decode across the 78 latent columns, 14.5% across
    the 44 rows: the halo is the same number of latent rows or columns either way."""
    whole = spec.decode_flops(121)
    assert sum(bands.flops(121, b) for b in bands.split(78, 2, COLS)) / whole == pytest.approx(1.0851, abs=1e-4)
    assert sum(bands.flops(121, b) for b in bands.split(44, 2, ROWS)) / whole == pytest.approx(1.1451, abs=1e-4)
