"""A world-2 rank's compute on one GPU: the baseline's run() at world 1 over a band of latent rows, CHUNK frames per
pass, random bf16 weights of the full geometry. A band of 22 rows with CHUNK = 2 does the convs, norms and
resamples of one rank of f121x2 (world 2 passes CHUNK x world frames; one GPU pads the band's edges with zeros
where two ranks exchange halo rows), without the exchanges and gathers; the whole 44 rows with CHUNK = 1 is f121x1.

Prints the median wall time of --reps calls (each between two synchronizes), the time run() took to return (the
launches), and with --profile the GPU's busy time in one profiled call and its largest kernels.

    python tools/baseline/world2_proxy.py --rows 22 --chunk 2 [--no-winograd] [--frames 31] [--profile]
"""
import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]
import torch  # noqa: E402

import loader  # noqa: E402
import spec  # noqa: E402
from helpers import random_weights  # noqa: E402


def busy(prof):
    """The GPU's busy seconds (the union of its kernels' and copies' intervals), their count, and the top rows."""
    ev = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    spans = sorted((e.time_range.start, e.time_range.end) for e in ev)
    total, cur = 0, None
    for s, e in spans:
        if cur is None or s > cur[1]:
            total += 0 if cur is None else cur[1] - cur[0]
            cur = [s, e]
        else:
            cur[1] = max(cur[1], e)
    total += cur[1] - cur[0]
    by = {}
    for e in ev:
        row = by.setdefault(e.name[:60], [0, 0.0])
        row[0] += 1
        row[1] += e.time_range.elapsed_us()
    top = sorted(by.items(), key=lambda kv: -kv[1][1])[:14]
    return total / 1e6, (spans[-1][1] - spans[0][0]) / 1e6, len(ev), top


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=44)
    p.add_argument("--chunk", type=int, default=1)
    p.add_argument("--frames", type=int, default=31)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--no-winograd", action="store_true", help="cuDNN's direct conv at every level")
    p.add_argument("--profile", action="store_true")
    p.add_argument("--solution", default="solutions/baseline")
    a = p.parse_args()
    sol = loader.load(a.solution)
    sol.module.CHUNK = a.chunk
    if a.no_winograd:
        sol.module.WINOGRAD_COLS = {}
    dev = torch.device("cuda")
    w = sol.prepare([t.to(torch.bfloat16) for t in random_weights(spec.FULL, device=dev)], 0, 1, None)
    gen = torch.Generator(dev).manual_seed(1)
    z = torch.randn(1, spec.LATENT_CHANNELS, a.frames, a.rows, spec.LATENT_HW[1], device=dev, generator=gen)
    z = z.to(torch.bfloat16)
    out = torch.empty(1, 3, spec.frames(a.frames), 16 * a.rows, spec.VIDEO_HW[1], dtype=torch.bfloat16, device=dev)
    sol.run(z, w, 0, 1, None, out)
    walls, launched = [], []
    for _ in range(a.reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        sol.run(z, w, 0, 1, None, out)
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        walls.append(time.perf_counter() - t0)
        launched.append(t1 - t0)
    tag = f"rows {a.rows} chunk {a.chunk} {'direct' if a.no_winograd else 'winograd'}"
    print(f"{tag}: median {statistics.median(walls):.4f} s ({', '.join(f'{x:.4f}' for x in walls)}), "
          f"run() returned after {statistics.median(launched):.4f} s")
    if a.profile:
        acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=acts) as prof:
            sol.run(z, w, 0, 1, None, out)
            torch.cuda.synchronize()
        b, span, n, top = busy(prof)
        print(f"  profiled call: {n} kernels and copies, GPU busy {b:.4f} s of a span of {span:.4f} s")
        for name, (count, us) in top:
            print(f"  {us / 1e6:8.4f} s {count:6d}x {name}")


if __name__ == "__main__":
    main()
