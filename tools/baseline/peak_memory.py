"""Peak memory of a solution's decode, without the data set.

On a GPU: random bf16 weights of the full geometry, f481's latents and output allocated, T latent frames decoded
(default 3: the first frame alone, then two passes, so every shape a pass uses runs); torch's peak of allocated
memory for a first call (which includes cuDNN's autotuning, as bench's warm-up does) and a second (a timed call's
steady state). One process per solution: cuDNN's autotune cache is per process.

On the CPU (--cpu): the same decode at the full latent size but base width 16 in fp32 (every activation 1/8 of the
full geometry's bf16 bytes), and the peak of the live tensors that the decode allocates, from the profiler's memory
events, counting the kernels' PyTorch twins and the CPU's convolutions by what they leave allocated, not their temporaries (on the GPU the
Triton kernels allocate nothing and cuDNN's workspace is its own). Where that peak falls is printed too.

    python tools/baseline/peak_memory.py solutions/baseline [--cpu] [--frames T]
"""
import argparse
import bisect
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]
import loader     # noqa: E402
from helpers import random_weights  # noqa: E402
import reference  # noqa: E402
import spec       # noqa: E402

INTERNAL = ("twin", "aten::slow_conv3d_forward", "aten::_slow_conv2d_forward", "aten::mkldnn_convolution")


def gpu(sol, t):
    dev = torch.device("cuda")
    weights = sol.prepare([w.to(torch.bfloat16) for w in random_weights(spec.FULL, device=dev)], 0, 1, None)
    z = torch.randn(1, spec.LATENT_CHANNELS, 121, *spec.LATENT_HW, device=dev).to(torch.bfloat16)
    out = torch.empty(spec.output_shape("f481x1"), dtype=torch.bfloat16, device=dev)
    peaks = []
    for _ in range(2):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        sol.run(z[:, :, :t], weights, 0, 1, None, out)
        torch.cuda.synchronize()
        peaks.append(torch.cuda.max_memory_allocated() / 2 ** 30)
    return f"first call {peaks[0]:.2f} GiB, second {peaks[1]:.2f} GiB"


def cpu(sol, t):
    kernels = getattr(sol.module, "kernels", None)
    for name in ("rows_torch", "shuffle_torch", "head_torch") if kernels else ():
        def twin(*a, _f=getattr(kernels, name), **k):
            with torch.profiler.record_function("twin"):
                return _f(*a, **k)
        setattr(kernels, name, twin)
    g = spec.Geometry("custom", 8, spec.FULL.latent_hw, 16)
    weights = sol.prepare(random_weights(g), 0, 1, None)
    z = torch.randn(1, 8, t, *g.latent_hw)
    out = torch.empty(1, 3, spec.frames(t), *g.video_hw)
    reference.set_scopes(True)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        sol.run(z, weights, 0, 1, None, out)
    events = sorted(prof.profiler.kineto_results.events(), key=lambda e: e.start_ns())
    spans = sorted((e.start_ns(), e.start_ns() + e.duration_ns()) for e in events if e.name() in INTERNAL)
    starts = [a for a, _ in spans]
    net = [0] * len(spans)
    steps = []                                # (time, bytes): an internal span counts once, at its end, net
    for e in events:
        if e.name() != "[memory]":
            continue
        i = bisect.bisect_right(starts, e.start_ns()) - 1     # internal spans do not nest
        if i >= 0 and spans[i][1] >= e.start_ns():
            net[i] += e.nbytes()
        else:
            steps.append((e.start_ns(), e.nbytes()))
    steps += [(end, n) for (_, end), n in zip(spans, net)]
    live = peak = at = 0
    for ts, n in sorted(steps):
        live += n
        if live > peak:
            peak, at = live, ts
    where = max((e for e in events if "/" in e.name() and e.start_ns() <= at <= e.start_ns() + e.duration_ns()),
                key=lambda e: len(e.name()), default=None)
    return f"peak of live activations {peak / 2 ** 20:.1f} MiB, in {where.name() if where else '?'}"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("solution")
    p.add_argument("--cpu", action="store_true")
    p.add_argument("--frames", type=int, default=3, help="latent frames decoded")
    a = p.parse_args()
    sol = loader.load(a.solution)
    if sol.prepare is None:
        sol.prepare = lambda w, *_: w
    print(f"{a.solution}: {(cpu if a.cpu else gpu)(sol, a.frames)}")


if __name__ == "__main__":
    main()
