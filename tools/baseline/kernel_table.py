"""Where a profiled call's GPU time goes by level and kind of kernel: the baseline's Winograd input and output
transforms, cuBLAS's products, cuDNN's convs, its own Triton kernels, copies. A kernel counts at the level of the
innermost named scope around it (bounds.scope_level); one outside every scope is "outside".

    python tools/baseline/kernel_table.py TRACE [--workload f121x1]

TRACE is a rank's trace from `bench.py --profile DIR` (plain or gzipped Chrome JSON).
"""
import argparse
import bisect
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [ROOT]
import bounds  # noqa: E402
import spec  # noqa: E402
from harness.report.profile import SCOPE_ROOTS, gpu_work, read_trace  # noqa: E402

# (kind, pattern on the kernel's name), the first match wins.
KINDS = (
    ("winograd input", r"^_vin_kernel"),
    ("winograd output", r"^_vout_kernel"),
    ("norm + SiLU", r"^_rows_kernel"),
    ("resample shuffle", r"^_shuffle_kernel"),
    ("head", r"^_head_kernel"),
    ("attention", r"fmha|attention|flash"),
    ("communication", r"nccl"),
    ("cuDNN conv", r"fprop|conv|nhwcAddPadding|cudnn"),
    ("cuBLAS product", r"nvjet|gemm|cutlass"),
    ("copies and fills", r"Memcpy|Memset|elementwise|copy|fill"),
)


def kind_of(name):
    for kind, pattern in KINDS:
        if re.search(pattern, name, re.IGNORECASE):
            return kind
    return "other"


def table(events, workload):
    """{(level label, kind): [GPU seconds, kernels]} and the summed GPU seconds of the trace's work."""
    t = spec.WORKLOADS[workload].latent_frames
    scopes = sorted((e for e in events if e.get("cat") == "gpu_user_annotation" and e.get("ph") == "X"
                     and str(e.get("name", "")).startswith(SCOPE_ROOTS)), key=lambda e: e["ts"])
    starts = [s["ts"] for s in scopes]
    rows, total = {}, 0.0
    for k in gpu_work(events):
        inner = None
        # Scopes nest, so the innermost one around the kernel is the latest-starting one that still covers it.
        for i in range(bisect.bisect_right(starts, k["ts"]) - 1, -1, -1):
            s = scopes[i]
            if s.get("pid") == k.get("pid") and s["ts"] + s["dur"] >= k["ts"] + k["dur"]:
                inner = s["name"]
                break
            if k["ts"] - s["ts"] > 60e6:      # no scope lasts a minute: stop looking
                break
        if inner is None:
            level = "outside"
        else:
            scale = bounds.scope_level(inner, t)
            level = "communication" if scale is None else bounds.level_label(scale)
        row = rows.setdefault((level, kind_of(k["name"])), [0.0, 0])
        row[0] += k["dur"] / 1e6
        row[1] += 1
        total += k["dur"] / 1e6
    return rows, total


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--workload", default="f121x1", choices=list(spec.WORKLOADS), help="the profiled workload (its latent frames place the "
                    "time convs' levels)")
    args = ap.parse_args(argv)
    rows, total = table(read_trace(args.trace), args.workload)
    print(f"{args.trace}: {total:.4f} GPU s of kernels, copies and memsets\n")
    print("| level | kind | GPU s | share of the kernels' time | kernels |\n|---|---|---|---|---|")
    order = list(bounds.LEVELS.values()) + ["communication", "outside"]
    for (level, kind), (s, n) in sorted(rows.items(), key=lambda r: (order.index(r[0][0]) if r[0][0] in order
                                                                     else len(order), -r[1][0])):
        print(f"| {level} | {kind} | {s:.4f} | {s / total:.1%} | {n} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
