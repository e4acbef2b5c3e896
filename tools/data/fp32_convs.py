"""What could make the data maker's exact fp32 decode (TF32 off) faster on one GPU: candidate ways to run the real
geometry's biggest convs in fp32, each timed and checked against an fp64 conv of the same inputs. One command, about
two to three minutes on one H200 (`--budget` stops it earlier):

    python tools/data/fp32_convs.py            # on the GPU; --cpu: a small smoke run of the same code

Per conv shape, the candidates (a causal conv's input buffer holds its 2 cached frames, then the new ones):
- ref:       what reference.causal_conv3d runs: contiguous NCDHW, F.pad, F.conv3d; cudnn.benchmark off (torch's
             default, what the data maker runs).
- bench:     ref with cudnn.benchmark on: cuDNN times its algorithms for each new shape and keeps the fastest. For
             fp32 that may be an FFT or Winograd algorithm, with a larger error: the `err` column shows it.
- cl:        channels_last_3d input and weights, the spatial padding inside the conv (no F.pad copy).
- cl+bench:  cl with cudnn.benchmark on.
- taps:      the 3x3x3 conv as three 3x3 conv2d over the frames, one per temporal tap, summed (another order).
- 3xTF32:    x = x_hi + x_lo and w = w_hi + w_lo, hi rounded to TF32 (10-bit mantissa), lo the exact remainder;
             conv(x_lo, w_hi) + conv(x_hi, w_lo) + conv(x_hi, w_hi) on TF32 tensor cores (fp32 accumulation),
             dropping only x_lo x w_lo (~2^-22 relative): CUTLASS's "3xTF32" (channels-last; +bench: benchmark on).
             The split is inside the timing.
- ref/bench frames=16: the same conv over 4 latent frames at once (16 video frames; 4 at 44 x 78): decoding several
             latent frames per decoder pass, like the baseline's chunks.
Not candidates: TF32 alone (its products are rounded to 10 bits: not the fp32 decode; one row, on the first shape,
shows that TF32 is on where the script asks for it); folding the nearest upsample
into the 3x3 conv (the baseline's phase convs) changes the weights' rounding and is left to a separate check.

`band =` is the share of a column band's outputs (the left half of the columns, computed alone with its one-column
halo) that are bit-identical to the whole conv's: what data/bands.py needs for the split references to round to
the same fp16 values as the whole decode.
`err` is max|y - y64| / max|y64|, y64 the fp64 conv of the same fp32 inputs (F.pad + conv3d; of the first 4 frames
for the 16-frame rows); a candidate keeps the
fp32 decode's definition within rounding when its err is of the order of ref's. TFLOP/s counts 2 x weight elements x
output positions (spec's count). Last, the whole fp32 decode (reference.decode_fp32, full geometry, 3 latent frames)
with cudnn.benchmark off and on: the steady third latent frame's time and rate, and how far the two videos are apart.
"""
import argparse
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
import reference  # noqa: E402
import spec  # noqa: E402
from data import synth  # noqa: E402

CL3, CL2 = torch.channels_last_3d, torch.channels_last
# (name, kind, C in, C out, rows, columns, output frames): per decoder pass of one latent frame in steady state; the
# 3x3x3 convs and resamples of up blocks 1-3 hold about 90% of the decode's FLOPs.
SHAPES = (
    ("up3 resnet conv 256->256", "conv3d", 256, 256, 352, 624, 4),
    ("up3 resnets.0.conv1 512->256", "conv3d", 512, 256, 352, 624, 4),
    ("up2 resample 512 (3x3 at 352x624)", "conv2d", 512, 512, 352, 624, 4),
    ("up2 resnet conv 512->512", "conv3d", 512, 512, 176, 312, 4),
    ("up2 resnets.0.conv1 1024->512", "conv3d", 1024, 512, 176, 312, 4),
    ("up1 resample 1024 (3x3 at 176x312)", "conv2d", 1024, 1024, 176, 312, 4),
    ("up1 resnet conv 1024->1024", "conv3d", 1024, 1024, 88, 156, 2),
    ("mid/up0 resnet conv 1024->1024", "conv3d", 1024, 1024, 44, 78, 1),
    ("conv_out 256->12", "conv3d", 256, 12, 352, 624, 4),
)
CHUNKED = {"up3 resnet conv 256->256": 16, "mid/up0 resnet conv 1024->1024": 4}


def flags(benchmark=False, tf32=False):
    return torch.backends.cudnn.flags(enabled=True, benchmark=benchmark, deterministic=False, allow_tf32=tf32)


def tf32_split(t):
    """(hi, lo): hi is t with its mantissa rounded to 10 bits (TF32), lo = t - hi exactly."""
    bits = t.view(torch.int32)
    hi = ((bits + 0x1000) & ~0x1FFF).view(torch.float32)   # round to nearest on the 13 dropped bits
    return hi, t - hi


def candidates(kind):
    """{name: (make inputs from (x, w), conv(x, w, b))} for a conv3d (x: (1, C, n + 2, H, W)) or a resample conv2d
    (x: (n, C, H, W))."""
    if kind == "conv2d":
        def plain(x, w, b):
            return F.conv2d(x, w, b, padding=1)
        lay = (lambda x, w: (x.contiguous(memory_format=CL2), w.contiguous(memory_format=CL2)))
    else:
        def plain(x, w, b):
            return F.conv3d(F.pad(x, (1, 1, 1, 1)), w, b)
        lay = (lambda x, w: (x.contiguous(memory_format=CL3), w.contiguous(memory_format=CL3)))

    def inside(x, w, b):
        return (F.conv2d(x, w, b, padding=1) if kind == "conv2d" else F.conv3d(x, w, b, padding=(0, 1, 1)))

    def taps(x, w, b):
        n = x.shape[2] - 2
        y = None
        for k in range(3):
            frames = x[:, :, k:k + n].permute(0, 2, 1, 3, 4).reshape(n, x.shape[1], *x.shape[3:])
            part = F.conv2d(frames, w[:, :, k], b if k == 0 else None, padding=1)
            y = part if y is None else y + part
        return y.view(1, n, *y.shape[1:]).permute(0, 2, 1, 3, 4)

    def tf32x3(x, w, b):
        xh, xl = tf32_split(x)
        wh, wl = tf32_split(w)
        with flags(benchmark=torch.backends.cudnn.benchmark, tf32=True):
            return inside(xl, wh, None) + inside(xh, wl, None) + inside(xh, wh, b)

    out = {"ref": (None, plain, False), "bench": (None, plain, True), "cl": (lay, inside, False),
           "cl+bench": (lay, inside, True)}
    if kind == "conv3d":
        out["taps"] = (None, taps, False)
    out["3xTF32"] = (lay, tf32x3, False)
    out["3xTF32+bench"] = (lay, tf32x3, True)

    def tf32(x, w, b):
        with flags(tf32=True):
            return inside(x, w, b)
    out["tf32 (not exact)"] = (lay, tf32, False)   # shows that TF32 is on where asked: its err is ~1e-3
    return out


def timed(fn, reps, device):
    """Median seconds of fn() after one warm-up call (the algorithm search of cudnn.benchmark is in the warm-up)."""
    y = fn()
    times = []
    for _ in range(reps):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            y = fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            y = fn()
            times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2], y


def band_same(lay, fn, bench, x, wt, b):
    """The fraction of a column band's outputs bit-identical to the same outputs of the whole conv: the band is the
    left half of the columns plus the one column its 3x3 taps need (what data/bands.py's split asks of a conv)."""
    half = x.shape[-1] // 2
    with flags(benchmark=bench):
        whole = fn(*(lay(x, wt) if lay else (x, wt)), b)[..., :half]
        part = fn(*(lay(x[..., :half + 1], wt) if lay else (x[..., :half + 1].contiguous(), wt)), b)[..., :half]
    return (whole == part).float().mean().item()


def row(cells, widths=(38, 10, 8, 9, 9, 10, 9)):
    print("  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(cells, widths))),
          flush=True)


def convs(device, scale, reps, deadline):
    row(("conv / candidate", "frames", "ms", "TFLOP/s", "x ref", "err", "band ="))
    for name, kind, cin, cout, h, w, n in SHAPES:
        cin, cout = max(cin // scale, 4), max(cout // scale, 4) if cout > 12 else cout
        h, w = max(h // scale, 8), max(w // scale, 8)
        for frames in (n, CHUNKED.get(name)):
            if frames is None or time.perf_counter() > deadline:
                continue
            g = torch.Generator(device=device).manual_seed(0)
            if kind == "conv2d":
                x = torch.randn(frames, cin, h, w, device=device, generator=g)
                wt = torch.randn(cout, cin, 3, 3, device=device, generator=g) / math.sqrt(cin * 9)
                flop = 2 * cout * cin * 9 * frames * h * w
            else:
                x = torch.randn(1, cin, frames + 2, h, w, device=device, generator=g)
                wt = torch.randn(cout, cin, 3, 3, 3, device=device, generator=g) / math.sqrt(cin * 27)
                flop = 2 * cout * cin * 27 * frames * h * w
            b = 0.1 * torch.randn(cout, device=device, generator=g)
            x64 = x[:n] if kind == "conv2d" else x[:, :, :n + 2]      # the fp64 truth of the first n frames
            with flags():
                y64 = candidates(kind)["ref"][1](x64.double(), wt.double(), b.double())
            top = y64.abs().max().item()
            ref_s = None
            for cand, (lay, fn, bench) in candidates(kind).items():
                if frames != n and cand not in ("ref", "bench") or cand.startswith("tf32") and name != SHAPES[0][0]:
                    continue
                xi, wi = lay(x, wt) if lay else (x, wt)
                with flags(benchmark=bench):
                    s, y = timed(lambda: fn(xi, wi, b), reps, device)
                y = y[:n] if kind == "conv2d" else y[:, :, :n]
                err = (y.double() - y64).abs().max().item() / top
                ref_s = s if cand == "ref" else ref_s
                same = band_same(lay, fn, bench, x, wt, b) if frames == n else float("nan")
                row((f"{name} {cand}" if cand == "ref" else f"  {cand}", frames, f"{1e3 * s:.2f}",
                     f"{flop / s / 1e12:.3g}", f"{ref_s / s:.2f}", f"{err:.2e}", f"{100 * same:.2f}%"))
                del y
            del x, y64


def whole_decode(device, geometry, frames=3):
    """reference.decode_fp32 of `frames` latent frames, cudnn.benchmark off then on."""
    weights = [t.to(torch.bfloat16).float().to(device) for t in synth.weights(geometry, 0)]
    z = synth.latents(geometry, 0, "fp32-convs", frames).to(device)
    flop = spec.decode_flops(frames, geometry) - spec.decode_flops(frames - 1, geometry)
    videos = {}
    print(f"\nwhole fp32 decode, {geometry.name} geometry, {frames} latent frames; the last (steady) latent frame:")
    for bench in (False, True):
        times = [0.0] * (frames + 1)
        start = time.perf_counter()

        def progress(i, total):
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            times[i] = time.perf_counter() - start
        with flags(benchmark=bench):
            videos[bench] = reference.decode_fp32(z, weights, progress=progress)
        dt = times[frames] - times[frames - 1]
        print(f"  cudnn.benchmark {'on ' if bench else 'off'}: {dt:.3f} s, {flop / dt / 1e12:.2f} TFLOP/s "
              f"(the whole decode {times[frames]:.2f} s, search included)", flush=True)
    d = (videos[True] - videos[False]).abs().max().item()
    same = (videos[True].half() == videos[False].half()).float().mean().item()
    print(f"  benchmark on against off: max|d| {d:.3e}, fp16 roundings identical {100 * same:.4f}%")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cpu", action="store_true", help="a smoke run on the CPU: channels / 16, rows and columns / 16")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--budget", type=float, default=120.0, help="seconds for the conv table (then the whole decode)")
    a = p.parse_args()
    device = torch.device("cpu" if a.cpu else "cuda")
    if device.type == "cuda":
        print(torch.cuda.get_device_name(), "torch", torch.__version__, "cuDNN", torch.backends.cudnn.version())
    torch.backends.cuda.matmul.allow_tf32 = False
    convs(device, 16 if a.cpu else 1, a.reps, time.perf_counter() + a.budget)
    whole_decode(device, spec.TINY if a.cpu else spec.FULL)


if __name__ == "__main__":
    main()
