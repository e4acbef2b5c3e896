"""Time one solution with no harness around it: `python tools/judge/standalone.py SOLUTION [--clip f121]
[--reps 10] [--gap S] [--random]`, for the judge's overhead (bench's median beside this one, same GPU, one run).

One process on GPU 0: the stored latents and weights, prepare(), one warm-up call, then each call between two
torch.cuda.synchronize() on perf_counter. Prints the median, every sample and torch's peak of allocated memory.
`--random` times random bf16 weights and latents of the full geometry instead, so that a clip whose data is not
made (f481 takes minutes) can be timed: the decode's work does not depend on the values."""
import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

import torch  # noqa: E402

import loader  # noqa: E402
import spec  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("solution")
    p.add_argument("--clip", default="f121")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--gap", type=float, default=0.0, help="seconds idle between calls (bench's checks take ~1 s)")
    p.add_argument("--random", action="store_true", help="random weights and latents: no data set needed")
    args = p.parse_args()
    workload = f"{args.clip}x1"
    if workload not in spec.WORKLOADS:
        p.error(f"--clip {args.clip}: expected one of {', '.join(sorted(spec.CLIPS))}")
    sol = loader.load(args.solution)
    if args.random:
        sys.path.insert(0, os.path.join(ROOT, "tests"))
        from helpers import random_weights
        weights = [w.to(torch.bfloat16) for w in random_weights(spec.FULL, device="cuda")]
        g = torch.Generator(device="cuda").manual_seed(1)
        z = torch.randn(1, spec.LATENT_CHANNELS, spec.WORKLOADS[workload].latent_frames, *spec.LATENT_HW,
                        device="cuda", generator=g).to(torch.bfloat16)
    else:
        weights = spec.load_weights("cuda")
        z, = spec.make_inputs(workload, "cuda")
    if sol.prepare is not None:
        weights = sol.prepare(weights, 0, 1, None)
    out = torch.empty(spec.output_shape(workload), dtype=torch.bfloat16, device="cuda")
    samples = []
    for i in range(args.reps + 1):
        time.sleep(args.gap)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        sol.run(z, weights, 0, 1, None, out)
        torch.cuda.synchronize()
        if i:
            samples.append(time.perf_counter() - t0)
    what = "random inputs" if args.random else "stored inputs"
    print(f"standalone {sol.name} {workload} ({what}, gap {args.gap} s): median {statistics.median(samples):.4f} s "
          f"over {len(samples)} calls; peak {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB; "
          f"samples {' '.join(f'{s:.4f}' for s in samples)}")


if __name__ == "__main__":
    main()
