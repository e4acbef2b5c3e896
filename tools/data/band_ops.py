"""Where the fp32 decode in bands (data/bands.py) stops being bit-identical to the whole decode, and what makes it
identical: on one GPU, in one process, the full geometry's first latent frames decoded whole and in two column bands
(TF32 off), the activations compared at every cut stage of reference.decoder, under a few variants:

- as is: reference.decode_fp32 as it stands (cuDNN with torch's defaults, cudnn.benchmark off; the RMS norms' channel
  sums in a fixed order, reference.channel_norm);
- F.normalize: reference.band_exact off: the RMS norms through F.normalize, whose reduction order follows the
  tensor's shape, and the resample's conv2d as such (decode_fp32 before 797042d);
- deterministic: torch.backends.cudnn.deterministic on (cuDNN restricted to deterministic algorithms);
- conv2d as conv3d: the resample's 3x3 conv2d (and the attention's 1x1 conv2d) run as conv3d with a kernel of depth 1,
  the same sums; cuDNN's 3d path may pick other algorithms than its 2d path.

Per variant and stage: the share of each band's values bit-identical to the same values of the whole decode, then
the video's max|d| and the share of fp16 roundings identical (what `python -m data.make --check` asks: 99.99%).
Keeping a copy of every stage's activations fills memory, and cuDNN runs another engine where a workspace cannot be
allocated: the variants' figures are those of a process short of memory. The other steps keep nothing:
- --plain: whole and split through bands.decode as the data maker's workers call it (videos on the GPU, then the CPU,
  then on the check's latents);
- --check: data.check.run with its tasks in this process (--check-variant: under which variant);
- --repeat (first): the whole decode three times, each against the first;
- --hog GiB (first): hold that much of the GPU from the start, leaving less room for cuDNN's workspaces;
- --per-op: bit-exact digests of every conv call's input and output, band against whole: the calls whose input agrees
  and output does not.

    python tools/data/band_ops.py [--variants ""] [--frames 3] [--plain] [--per-op] [--hog 110]   # --cpu: tiny
"""
import argparse
import contextlib
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
import reference  # noqa: E402
import spec  # noqa: E402
from data import bands, synth  # noqa: E402
from data.decode import video_shape  # noqa: E402

_conv2d = F.conv2d


def conv2d_as_3d(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    if x.dim() != 4 or stride != 1 or dilation != 1 or groups != 1:
        return _conv2d(x, w, b, stride, padding, dilation, groups)
    p = (padding, padding) if isinstance(padding, int) else tuple(padding)
    y = F.conv3d(x.unsqueeze(2), w.unsqueeze(2), b, padding=(0, *p))
    return y.squeeze(2)


@contextlib.contextmanager
def variant(name):
    old, fixed = torch.backends.cudnn.deterministic, reference.band_exact
    try:
        if name == "F.normalize":
            reference.band_exact = contextlib.nullcontext
        if name == "deterministic":
            torch.backends.cudnn.deterministic = True
        if name == "conv2d as conv3d":
            F.conv2d = conv2d_as_3d
        yield
    finally:
        torch.backends.cudnn.deterministic, reference.band_exact = old, fixed
        F.conv2d = _conv2d


def decode(z, weights, band, geometry, video):
    """[(stage, activation after the cut)] of one band (or the whole decode), its video written into band.of(video)."""
    seen = []
    inner = None if band.whole else bands.Cut(band, geometry)

    def cut(x, stage):
        y = x if inner is None else inner(x, stage)
        seen.append((stage, y.clone()))
        return y
    reference.decode_fp32(z, weights, out=band.of(video), cut=cut)
    return seen


def per_op(z, weights, g, device, frames, margin=16):
    """The first band (its columns start at the image's left edge, so a band column is the whole decode's column)
    decoded with a bit-exact digest of every conv call's input and output kept (no copies: holding copies changes
    which cuDNN engines can get their workspace), then the whole decode with the same digests over the same columns:
    the band's columns less `margin` at the cut edge, where its zero padding spoils a column per conv. A call whose
    input digest agrees and output digest does not is an op whose result depends on the width it runs over."""
    band = bands.split(g.latent_hw[1], 2, bands.COLUMNS)[0]
    conv2d, conv3d = F.conv2d, F.conv3d
    seen, rows = [], []

    def digest(t, n):
        return t[..., :n].contiguous().view(torch.int32).to(torch.int64).sum().item() if n > 0 else None

    def recording(fn, kind):
        def hook(x, w, *args, **kwargs):
            y = fn(x, w, *args, **kwargs)
            nx, ny = x.shape[-1] - margin, y.shape[-1] - margin
            seen.append((kind, tuple(w.shape), tuple(x.shape), nx, ny, digest(x, nx), digest(y, ny)))
            return y
        return hook

    def comparing(fn, kind):
        def hook(x, w, *args, **kwargs):
            y = fn(x, w, *args, **kwargs)
            k, shape, bxs, nx, ny, dx, dy = seen[len(rows)]
            assert (k, shape) == (kind, tuple(w.shape)), (k, shape, kind, w.shape)
            rows.append((kind, shape, tuple(x.shape), bxs, digest(x, nx) == dx, digest(y, ny) == dy))
            return y
        return hook

    video = torch.empty(video_shape(frames, g), device=device)
    try:
        F.conv2d, F.conv3d = recording(conv2d, "conv2d"), recording(conv3d, "conv3d")
        decode(z, weights, band, g, video)
        F.conv2d, F.conv3d = comparing(conv2d, "conv2d"), comparing(conv3d, "conv3d")
        decode(z, weights, bands.split(g.latent_hw[1], 1)[0], g, video)
    finally:
        F.conv2d, F.conv3d = conv2d, conv3d
    print(f"\nper conv call, band {band.label()} against the whole decode (margin {margin} columns), the calls whose "
          f"input agrees and output does not:")
    print("  call  kind    weight                 whole input -> band input")
    for i, (kind, shape, xs, bxs, same_x, same_y) in enumerate(rows):
        if same_x and not same_y:
            print(f"  {i:4d}  {kind}  {str(shape):22s} {str(xs[1:]):18s} -> {str(bxs[-2:])}")
    print(f"  {len(rows)} calls: {sum(r[5] for r in rows)} outputs agree, {sum(r[4] for r in rows)} inputs agree",
          flush=True)


def plain(z, weights, g, parts, where):
    """Whole and split through bands.decode exactly as the data maker's workers call it (no recording), the videos
    on `where`: their max|d| and fp16 identity."""
    whole, split = (torch.empty(video_shape(z.shape[2], g), device=where) for _ in range(2))
    bands.decode(z, weights, bands.split(g.latent_hw[1], 1)[0], whole)
    for b in parts:
        bands.decode(z, weights, b, b.of(split))
    same = (whole.half() == split.half()).float().mean().item()
    print(f"\nbands.decode, videos on {where}: max|d| {(whole - split).abs().max().item():.3e}, "
          f"fp16 identical {100 * same:.4f}%", flush=True)


def check_in_process(device, g):
    """data.check.run with its tasks run one after another in this process (data.decode.run, as a worker runs
    them) instead of in a spawned worker per GPU."""
    from data import check, decode, tasks

    def execute(todo, devices, context, handle):
        state = {}
        for task in todo:
            handle(("start", str(device), task))
            info = decode.run(task, device, context, state, handle)
            handle(("done", str(device), task, info))
    saved, tasks.execute = tasks.execute, execute
    try:
        print("\ndata.check.run, its tasks in this process:")
        check.run(g, [device])
    finally:
        tasks.execute = saved


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cpu", action="store_true")
    p.add_argument("--frames", type=int, default=3)
    p.add_argument("--variants", default="as is,F.normalize,deterministic")
    p.add_argument("--per-op", action="store_true", help="then compare the first band's convs call by call (digests)")
    p.add_argument("--plain", action="store_true", help="then whole and split as the data maker's workers decode")
    p.add_argument("--check", action="store_true", help="then data.check.run with its tasks in this process")
    p.add_argument("--hog", type=float, default=0.0, help="GiB held on the device from the start (less room for "
                   "cuDNN's workspaces)")
    p.add_argument("--check-variant", default="as is", help="the variant that --check runs under")
    p.add_argument("--repeat", action="store_true", help="first the whole decode three times, each against the first")
    a = p.parse_args()
    device = torch.device("cpu" if a.cpu else "cuda")
    g = spec.TINY if a.cpu else spec.FULL
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if device.type == "cuda":
        print(torch.cuda.get_device_name(), "torch", torch.__version__, "cuDNN", torch.backends.cudnn.version())
    hog = torch.empty(int(a.hog * 2 ** 30), dtype=torch.uint8, device=device) if a.hog else None  # noqa: F841
    weights = [t.to(torch.bfloat16).float().to(device) for t in synth.weights(g, 0)]
    z = synth.latents(g, 0, "band-ops", a.frames).to(device)
    parts = bands.split(g.latent_hw[1], 2, bands.COLUMNS)
    if a.repeat:
        videos = []
        for k in range(3):
            videos.append(torch.empty(video_shape(a.frames, g), device=device))
            bands.decode(z, weights, bands.split(g.latent_hw[1], 1)[0], videos[-1])
        for k in (1, 2):
            same = (videos[0] == videos[k]).float().mean().item()
            print(f"whole decode {k + 1} of this process against its first: bit-identical {100 * same:.4f}%")
        del videos
    for name in filter(None, a.variants.split(",")):
        t0 = time.perf_counter()
        whole, split = (torch.empty(video_shape(a.frames, g), device=device) for _ in range(2))
        with variant(name):
            ws = decode(z, weights, bands.split(g.latent_hw[1], 1)[0], g, whole)
            outs = [decode(z, weights, b, g, split) for b in parts]
        print(f"\n{name} ({time.perf_counter() - t0:.1f} s)")
        for k, band in enumerate(parts):
            sp = bands.spans(band, g)
            first = {}
            for (stage, w), (stage2, y) in zip(ws, outs[k]):
                assert stage == stage2
                ref = w.narrow(band.axis, sp[stage][0], sp[stage][1] - sp[stage][0])
                same = (ref == y).float().mean().item()
                first.setdefault(stage, []).append(same)
            print(f"  band {band.label()}: bit-identical share per stage (min over the frames): " +
                  ", ".join(f"{s}: {100 * min(v):.2f}%" for s, v in sorted(first.items())))
        d = (whole - split).abs().max().item()
        same = (whole.half() == split.half()).float().mean().item()
        print(f"  video: max|d| {d:.3e} (bound {bands.tolerance(whole):.2e}), fp16 identical {100 * same:.4f}%",
              flush=True)
        del whole, ws, outs, split
    if a.plain:
        parts = bands.split(g.latent_hw[1], 2, bands.COLUMNS)
        for where in (device, torch.device("cpu")):
            plain(z, weights, g, parts, where)
        z2 = synth.latents(g, 0, "check", a.frames).to(device)
        plain(z2, weights, g, parts, device)
    if a.check:
        with variant(a.check_variant):
            check_in_process(device, g)
    if a.per_op:
        per_op(z[:, :, :2], weights, g, device, min(a.frames, 2))


if __name__ == "__main__":
    main()
