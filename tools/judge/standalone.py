"""Time one solution with no harness around it: `python tools/judge/standalone.py SOLUTION [--clip f121]
[--reps 10] [--gap S]`, for the judge's overhead (bench's median beside this one, same GPU, one run).

One process on GPU 0: the stored latents and weights, prepare(), one warm-up call, then each call between two
torch.cuda.synchronize() on perf_counter. Prints the median and every sample."""
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
    args = p.parse_args()
    workload = f"{args.clip}x1"
    sol = loader.load(args.solution)
    weights = spec.load_weights("cuda")
    if sol.prepare is not None:
        weights = sol.prepare(weights, 0, 1, None)
    z, = spec.make_inputs(workload, "cuda")
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
    print(f"standalone {sol.name} {workload} (gap {args.gap} s): median {statistics.median(samples):.4f} s over {len(samples)} calls; "
          f"samples {' '.join(f'{s:.4f}' for s in samples)}")


if __name__ == "__main__":
    main()
