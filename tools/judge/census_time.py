"""The precision census's time on the full geometry: the baseline's prepare() on random bf16 weights, then
harness.rank.census.narrow over what it returned, twice (run from the repository's root).

    python tools/judge/census_time.py
"""
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]
import torch  # noqa: E402

import loader  # noqa: E402
import spec  # noqa: E402
from harness.rank import census  # noqa: E402
from helpers import random_weights  # noqa: E402


def main():
    sol = loader.load(os.path.join(ROOT, "solutions", "baseline"))
    dev = torch.device("cuda")
    given = [t.to(torch.bfloat16) for t in random_weights(spec.FULL, device=dev)]
    t0 = time.perf_counter()
    w = sol.prepare(given, 0, 1, None)
    torch.cuda.synchronize()
    tp = time.perf_counter() - t0
    for _ in range(2):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        bad = census.narrow(w)
        torch.cuda.synchronize()
        print(f"census of the baseline's {len(w)} prepared tensors ({sum(t.numel() for t in w) / 1e6:.0f} M "
              f"elements): {time.perf_counter() - t0:.2f} s, findings {bad[:3]}; prepare {tp:.1f} s; peak "
              f"{torch.cuda.max_memory_allocated() / 2 ** 30:.1f} GiB")


if __name__ == "__main__":
    main()
