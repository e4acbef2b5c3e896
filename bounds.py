"""The roofline: how fast any solution could decode each workload, and where the work is.

    python bounds.py [--gpu NAME] [--measure | --ceilings bounds.json] [--results bench.json] [--json PATH]
                     [--plot PNG] [--tiny]

Lower bound of one call = max(compute time, memory time): the decode's FLOPs (spec.work, a multiply-add counting
2, every conv at its full kernel) divided over the world's GPUs at the dense bf16 tensor-core rate, and the bytes
that must move (the video written, the weights read) at the HBM bandwidth. Beside the counted FLOPs: those the
baseline executes (Winograd, the phase fold) and the fraction of the peak they run at; and the floor of the
impossibly-fast check, the FLOPs any exact algorithm needs (spec.floor_flops). The decode is compute-bound by three
orders of magnitude, so the bound is the FLOPs at the peak rate. `--measure` also measures this GPU's ceilings (a
large bf16 matmul, a device-to-device copy) and gives the bounds on those. bench.py's roofline column and ci.py's
impossibly-fast check call `bound` from here.
"""
import argparse
import json
import math
import re
import sys

import spec
from harness.judge import hardware
from harness.judge.hardware import GPUS, gpu_key  # noqa: F401 (bounds.GPUS, bounds.gpu_key)
from harness.report import plot as plot_module

LEVELS = {1: "latent (44 x 78)", 2: "2x (88 x 156)", 4: "4x (176 x 312)", 8: "8x (352 x 624)"}


def bound(workload, gpu="H200", geometry=spec.FULL, peaks=None):
    """{"flops", "bytes", "gpus", "flops_per_gpu", "intensity", "compute_s", "memory_s", "bound_s", "binds",
    "floor_s"} of one call; `peaks` ({"bf16_tflops", "hbm_tbps"}) overrides the GPU's datasheet figures."""
    e = spec.WORKLOADS[workload]
    return bound_of(e.latent_frames, e.world, peaks or GPUS[gpu], geometry)


def bound_of(latent_frames, world, peaks, geometry=spec.FULL):
    """The bound of decoding any latents of `latent_frames` frames on `world` GPUs (ci.py's fresh latents too)."""
    w = spec.work_of(latent_frames, world, geometry)
    per_gpu, nbytes = w["flops"] / world, w["bytes"]
    compute = per_gpu / (peaks["bf16_tflops"] * 1e12)
    memory = nbytes / (peaks["hbm_tbps"] * 1e12)
    # What any exact algorithm needs (spec.floor_flops): the impossibly-fast check's floor, which a solution with
    # fewer multiplies than the direct convs (Winograd, the phase fold) stays above, and a replay stays far below.
    floor = spec.floor_flops(latent_frames, geometry) / world / (peaks["bf16_tflops"] * 1e12)
    return {"flops": w["flops"], "bytes": nbytes, "gpus": world, "flops_per_gpu": per_gpu,
            "intensity": per_gpu / nbytes, "compute_s": compute, "memory_s": memory, "bound_s": max(compute, memory),
            "binds": "compute" if compute >= memory else "memory", "floor_s": max(floor, memory)}


# The tiny geometry's "hardware limit" on a CPU. Its decode is overhead-bound (about 0.01 counted TFLOP/s on a
# 2-core machine, 0.0006 TFLOP/s of its floor FLOPs), so 0.025 is far above any CPU's rate on the floor, and the
# floor it sets on f5 (1.3 ms) stays above a replayed result's call time (a copy and the window's own overhead) even
# on a loaded machine.
CPU_PEAK = {"bf16_tflops": 0.025, "hbm_tbps": 1.0}


def peaks_for(cpu, gpu_name):
    """The rates a call is held to: the CPU's stand-in, this GPU's datasheet, or (an unknown GPU) the fastest
    datasheet of the table, so that "impossible" never fails an honest solution."""
    if cpu:
        return CPU_PEAK
    key = gpu_key(gpu_name)
    return GPUS[key] if key else max(GPUS.values(), key=lambda p: p["bf16_tflops"])


def impossible(seconds, latent_frames, world, peaks, geometry=spec.FULL):
    """None, or why a call of `seconds` is faster than any exact algorithm could be (bound_of's floor_s)."""
    b = bound_of(latent_frames, world, peaks, geometry)
    if seconds >= b["floor_s"]:
        return None
    return (f"{seconds * 1e3:.3f} ms is below the roofline floor {b['floor_s'] * 1e3:.3f} ms (the "
            f"{spec.floor_flops(latent_frames, geometry) / world / 1e12:.3g} TFLOP per GPU that any exact algorithm "
            f"needs, at {peaks['bf16_tflops']:g} TFLOP/s)")


def op_kind(name):
    """The kind of op a conv weight belongs to, for the breakdown."""
    if name == "attention":
        return "attention products (QK^T, PV)"
    if name.startswith("post_quant_conv"):
        return "post_quant_conv 1x1x1"
    if ".attentions." in name:
        return "attention to_qkv / proj 1x1"
    if name.startswith("decoder.conv_out"):
        return "conv_out 3x3x3"
    if ".time_conv." in name:
        return "time conv 3x1x1"
    if ".resample." in name:
        return "resample 3x3 conv2d"
    if ".conv_shortcut." in name:
        return "conv_shortcut 1x1x1"
    return "3x3x3 convs (conv_in, resnets)"


def level_label(scale, geometry=spec.FULL):
    return LEVELS[scale] if geometry is spec.FULL else f"{scale}x"


def weight_scale(name, t):
    """The spatial scale of a flops_by_weight entry (the attention's products at the latent grid's)."""
    return 1 if name == "attention" else spec.conv_level(name, t)[1]


def breakdown(t, geometry=spec.FULL):
    """[(kind, level, counted flops, the baseline's executed flops)] of one decode of t latent frames; the rows sum
    to spec.decode_flops(t) and to the sum of executed_by_weight(t)."""
    rows = {}
    executed = executed_by_weight(t, geometry)
    for name, flops in spec.flops_by_weight(t, geometry).items():
        key = (op_kind(name), level_label(weight_scale(name, t), geometry))
        c, x = rows.get(key, (0, 0))
        rows[key] = (c + flops, x + executed[name])
    return [(k, lvl, c, x) for (k, lvl), (c, x) in sorted(rows.items(), key=lambda kv: -kv[1][0])]


# What the shipped baseline executes (solutions/baseline): Winograd for the causal 3x3x3 convs at these spatial
# scales, with tiles of 2 rows and this many output columns (its WINOGRAD_COLS by level; tests/task/test_bounds.py
# keeps the two equal): 4 (COLS + 2) multiplies per 2 COLS outputs, 16 of 36 for F(2x2,3x3) and 24 of 72 for
# F(2x4,3x3). Every resample runs as four 2x2 phase convs (4/9 of the 3x3 conv after the 2x upsample).
BASELINE_WINOGRAD_COLS = {1: 2, 2: 2, 4: 2}


def executed_by_weight(t, geometry=spec.FULL):
    """spec.flops_by_weight with the baseline's algorithms: the FLOPs its convs execute."""
    shapes = dict(spec.weight_list(geometry))
    out = {}
    for name, f in spec.flops_by_weight(t, geometry).items():
        k = () if name == "attention" else tuple(shapes[name][2:])
        if ".resample." in name:
            f = f * 4 / 9
        elif k == (3, 3, 3) and (cols := BASELINE_WINOGRAD_COLS.get(spec.conv_level(name, t)[1])):
            f = f * 4 * (cols + 2) / (9 * 2 * cols)
        out[name] = f
    return out


def scope_level(scope, t):
    """The spatial scale (1, 2, 4, 8) of a profiled scope's work, or None for the ranks' communication
    (halo_exchange, gather). Scopes follow the weights' names (docs/profiling.md): a conv's is at its weight's level
    (spec.conv_level: a resample at the scale it writes), norm_out and unpatchify at the video's, an up block's or
    its upsampler's own work (copies before its resnets) at the block's input level."""
    name = scope.replace("/", ".") + "."
    if name.startswith(("halo_exchange.", "gather.")):
        return None
    block = re.fullmatch(r"decoder\.up_blocks\.(\d+)\.(upsampler\.)?", name)
    if block:
        name = f"decoder.up_blocks.{block.group(1)}.resnets."
    return spec.conv_level(name, t)[1]


def levels(workload, profile, peaks, geometry=spec.FULL):
    """[{"level", "executed_flops", "ceiling_s", "profiled_s", "share", "of_limit"}] of a call that bench.py
    --profile timed (its JSON's `profile`; rank 0's scopes). Per spatial level: the FLOPs the baseline's algorithms
    execute there per GPU (executed_by_weight over the world), their time at `peaks`' bf16 rate, the GPU time of
    the level's scopes (self times), its share of the profiled call and the ceiling's time over it. Then the
    communication scopes, and the call's span less every scope's GPU time (launch gaps, work outside the scopes)."""
    e = spec.WORKLOADS[workload]
    t = e.latent_frames
    flops, spent = {}, {}
    for name, f in executed_by_weight(t, geometry).items():
        scale = weight_scale(name, t)
        flops[scale] = flops.get(scale, 0.0) + f / e.world
    rank0 = profile["ranks"][0]
    for row in rank0["scopes"]:
        key = scope_level(row["scope"], t)
        spent[key] = spent.get(key, 0.0) + row["self_s"]
    call = rank0["call_s"]
    rows = []
    for scale in sorted(flops):
        ceiling, s = flops[scale] / (peaks["bf16_tflops"] * 1e12), spent.get(scale, 0.0)
        rows.append({"level": level_label(scale, geometry), "executed_flops": flops[scale], "ceiling_s": ceiling,
                     "profiled_s": s, "share": s / call, "of_limit": ceiling / s if s > 0 else None})
    rest = max(0.0, call - sum(spent.values()))
    for label, s in (("communication", spent.get(None, 0.0)), ("outside the scopes' GPU time", rest)):
        rows.append({"level": label, "executed_flops": 0.0, "ceiling_s": 0.0, "profiled_s": s, "share": s / call,
                     "of_limit": None})
    return rows


def measure():
    """This GPU's ceilings: an 8192^3 bf16 matmul (TFLOP/s) and a 4 GiB device-to-device copy (TB/s, bytes read +
    written), each the median of 10 timed runs after 3 warm-ups."""
    import torch
    if not torch.cuda.is_available():
        raise SystemExit("--measure needs a CUDA GPU")

    def timed(fn, n=10):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(n):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) / 1e3)
        return sorted(times)[n // 2]

    n = 8192
    x = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    mm = 2 * n ** 3 / timed(lambda: x @ y) / 1e12
    src = torch.empty(1 << 31, device="cuda", dtype=torch.int16)
    dst = torch.empty_like(src)
    copy = 2 * src.numel() * 2 / timed(lambda: dst.copy_(src)) / 1e12
    return {"bf16_tflops": mm, "hbm_tbps": copy, "device": torch.cuda.get_device_name(),
            "method": "bf16 8192^3 matmul and a 4 GiB device copy, median of 10 after 3 warm-ups"}


def load_results(paths, solution=None):
    """{"workloads", "objective_s"} of one solution from bench.py JSON files; the objective only when one file
    gives it for all the timed workloads."""
    merged, objective = {}, None
    for path in paths:
        with open(path) as f:
            r = json.load(f)
        if "solutions" in r:
            r = r["solutions"][solution or next(iter(r["solutions"]))]
        merged.update({w: e for w, e in r["workloads"].items() if e.get("median_s")})
        if r.get("objective_complete"):
            objective = r["objective_s"]
    return {"workloads": merged, "objective_s": objective}


def report(gpu, geometry, measured=None, results=None, peaks=None):
    """{"gpu", "peaks", "measured", "workloads": {w: {...}}, "objective": {...}} for the JSON and the tables;
    `peaks` replaces the GPU's datasheet figures (bench's report of a CPU run: CPU_PEAK, `gpu` naming it)."""
    out = {"gpu": gpu, "peaks": peaks or GPUS[gpu], "measured": measured, "geometry": geometry.name, "workloads": {}}
    res = (results or {}).get("workloads", {})
    for w in spec.WORKLOADS:
        e = bound(w, gpu, geometry, peaks=peaks)
        e["executed_flops"] = sum(executed_by_weight(spec.WORKLOADS[w].latent_frames, geometry).values())
        if measured:
            e["measured_bound_s"] = bound(w, gpu, geometry, peaks=measured)["bound_s"]
        r = res.get(w) or {}
        if r.get("median_s"):
            e["achieved_s"] = r["median_s"]
            e["achieved_tflops"] = e["flops"] / r["median_s"] / 1e12
            e["fraction_of_bound"] = e["bound_s"] / r["median_s"]
            # The rate the baseline's algorithms run at, against the tensor cores' peak.
            e["fraction_of_executed_ceiling"] = (e["executed_flops"] / e["gpus"] / r["median_s"]
                                                 / (out["peaks"]["bf16_tflops"] * 1e12))
            if measured:
                e["fraction_of_measured_bound"] = e["measured_bound_s"] / r["median_s"]
        out["workloads"][w] = e
        if (r.get("profile") or {}).get("ranks"):
            out.setdefault("levels", {})[w] = levels(w, r["profile"], measured or out["peaks"], geometry)
            out["levels_ceiling"] = "measured" if measured else "datasheet"
    timed = spec.TIMED_WORKLOADS
    geo = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs))  # noqa: E731
    obj = {"bound_s": geo([out["workloads"][w]["bound_s"] for w in timed])}
    if measured:
        obj["measured_bound_s"] = geo([out["workloads"][w]["measured_bound_s"] for w in timed])
    if results and results.get("objective_s"):
        obj["achieved_s"] = results["objective_s"]
        obj["fraction_of_bound"] = obj["bound_s"] / results["objective_s"]
    out["objective"] = obj
    return out


def plot(rep, path, title="Wan2.2 VAE decode: roofline"):
    """Log-log roofline: per-GPU arithmetic intensity against TFLOP/s per GPU, ceilings and achieved points (filled:
    the counted FLOPs; hollow: those the baseline's algorithms execute, executed_by_weight)."""
    plt = plot_module.pyplot("the roofline plot")
    fig, ax = plt.subplots(figsize=(8, 5.5))
    points = [e["intensity"] for e in rep["workloads"].values()]
    xs = [10 ** (k / 10) for k in range(0, int(10 * math.log10(max(points))) + 6)]
    ceiling = f"{rep['gpu']} datasheet" if rep["gpu"] in GPUS else rep["gpu"]
    for label, p, style in [(ceiling, rep["peaks"], "-"), ("measured", rep["measured"], "--")]:
        if not p:
            continue
        ax.plot(xs, [min(p["bf16_tflops"], x * p["hbm_tbps"]) for x in xs], style, color="gray",
                label=f"{label}: {p['bf16_tflops']:.3g} TFLOP/s, {p['hbm_tbps']:.3g} TB/s")
    shown = [(w, e) for w, e in rep["workloads"].items() if "achieved_tflops" in e]
    for i, (w, e) in enumerate(shown):
        per_gpu = e["achieved_tflops"] / e["gpus"]
        ax.scatter([e["intensity"]], [per_gpu], zorder=3, color=f"C{i}",
                   label=f"{w}: {per_gpu:.3g} TFLOP/s per GPU, {100 * e['fraction_of_bound']:.0f}% of bound")
        executed = e["executed_flops"] / e["flops"]
        ax.scatter([e["intensity"] * executed], [per_gpu * executed], zorder=3, facecolors="none",
                   edgecolors=f"C{i}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity per GPU (FLOP / byte)")
    ax.set_ylabel("TFLOP/s per GPU (FLOPs / time)")
    ax.set_title(title + ("\nfilled: counted FLOPs; hollow: the baseline's executed FLOPs" if shown else ""))
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def print_report(rep, console, geometry):
    from rich.table import Table
    t = Table(title=f"bounds on {rep['gpu']} ({rep['peaks']['bf16_tflops']:.0f} TFLOP/s bf16 dense, "
                    f"{rep['peaks']['hbm_tbps']} TB/s) - {geometry.name} geometry")
    cols = ["workload", "GPUs", "PFLOP/GPU", "executed", "GB", "FLOP/B", "bound s", "binds"]
    measured = rep["measured"] is not None
    achieved = any("achieved_s" in e for e in rep["workloads"].values())
    if measured:
        cols.append("measured bound s")
    if achieved:
        cols += ["achieved s", "TFLOP/s", "of bound", "executed of peak"]
    for c in cols:
        t.add_column(c, justify="left" if c in ("workload", "binds") else "right")
    for w, e in rep["workloads"].items():
        row = [w, str(e["gpus"]), f"{e['flops_per_gpu'] / 1e15:.4f}",
               f"{e['executed_flops'] / e['gpus'] / 1e15:.4f}", f"{e['bytes'] / 1e9:.2f}",
               f"{e['intensity']:.0f}", f"{e['bound_s']:.4f}", e["binds"]]
        if measured:
            row.append(f"{e['measured_bound_s']:.4f}")
        if achieved:
            row += [f"{e['achieved_s']:.4f}", f"{e['achieved_tflops']:.0f}", f"{100 * e['fraction_of_bound']:.1f}%",
                    f"{100 * e['fraction_of_executed_ceiling']:.1f}%"] if "achieved_s" in e else ["", "", "", ""]
        t.add_row(*row)
    console.print(t)
    o = rep["objective"]
    line = f"objective bound (geomean of the {len(spec.TIMED_WORKLOADS)} timed workloads): {o['bound_s']:.4f} s"
    if "measured_bound_s" in o:
        line += f", {o['measured_bound_s']:.4f} s on the measured ceilings"
    if "achieved_s" in o:
        line += f"; achieved {o['achieved_s']:.4f} s = {100 * o['fraction_of_bound']:.1f}% of the bound"
    console.print(line)
    if rep["measured"]:
        m = rep["measured"]
        console.print(f"measured on {m['device']}: {m['bf16_tflops']:.0f} TFLOP/s bf16 matmul, "
                      f"{m['hbm_tbps']:.2f} TB/s device copy ({m['method']})")
    for w, rows in rep.get("levels", {}).items():
        rate = (rep["measured"] or rep["peaks"])["bf16_tflops"]
        lt = Table(title=f"{w}, the profiled call (rank 0): GPU time per level, and the executed FLOPs at "
                         f"{rate:.0f} TFLOP/s ({rep['levels_ceiling']})")
        for c in ("level", "executed PFLOP/GPU", "at the ceiling s", "profiled s", "share of call", "ceiling / profiled"):
            lt.add_column(c, justify="left" if c == "level" else "right")
        for r in rows:
            flops = r["executed_flops"] > 0
            lt.add_row(r["level"], f"{r['executed_flops'] / 1e15:.4f}" if flops else "",
                       f"{r['ceiling_s']:.4f}" if flops else "", f"{r['profiled_s']:.4f}", f"{100 * r['share']:.1f}%",
                       f"{100 * r['of_limit']:.1f}%" if r["of_limit"] is not None else "")
        console.print(lt)
    t = spec.CLIPS["f481"]["latent_frames"]
    total = spec.decode_flops(t, geometry)
    bt = Table(title=f"where the FLOPs are: one decode of f481 ({t} latent frames, {total / 1e15:.3f} PFLOP; "
                     f"executed: by the baseline's algorithms)")
    for c in ("op", "level", "PFLOP", "share", "executed PFLOP"):
        bt.add_column(c, justify="left" if c in ("op", "level") else "right")
    for kind, level, f, x in breakdown(t, geometry):
        bt.add_row(kind, level, f"{f / 1e15:.4f}", f"{100 * f / total:.1f}%", f"{x / 1e15:.4f}")
    console.print(bt)


def main(argv=None):
    p = argparse.ArgumentParser(description="Roofline bounds of the task's workloads.")
    p.add_argument("--gpu", help=f"one of {', '.join(GPUS)} (default: the visible GPU, else H200)")
    p.add_argument("--measure", action="store_true", help="measure this GPU's matmul and copy ceilings too")
    p.add_argument("--ceilings", help="use the measured ceilings of an earlier `bounds.py --measure --json` file")
    p.add_argument("--results", nargs="+", help="bench.py --json files (later ones win per workload): achieved time "
                                                "and fraction of the bound")
    p.add_argument("--solution", help="with several solutions in a --results file, which one (default: the first)")
    p.add_argument("--json", help="write the report here")
    p.add_argument("--plot", help="write a roofline PNG here (needs matplotlib)")
    p.add_argument("--tiny", action="store_true", help="the tiny geometry's figures")
    args = p.parse_args(argv)
    from harness.report.console import console as plain_console
    console = plain_console(width=140)
    geometry = spec.TINY if args.tiny else spec.FULL
    gpu = args.gpu
    if gpu is None:
        gpu = gpu_key(hardware.detect_gpus()[1]) or "H200"
    gpu = gpu_key(gpu) or gpu
    if gpu not in GPUS:
        console.print(f"unknown GPU {args.gpu}; known: {', '.join(GPUS)}", style="red")
        return 2
    measured = measure() if args.measure else None
    if args.ceilings:
        with open(args.ceilings) as f:
            measured = json.load(f).get("measured")
        if not measured:
            console.print(f"{args.ceilings} holds no measured ceilings (make it with --measure --json)", style="red")
            return 2
    results = load_results(args.results, args.solution) if args.results else None
    rep = report(gpu, geometry, measured, results)
    rep["sources"] = {k: v["source"] for k, v in GPUS.items()}
    print_report(rep, console, geometry)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rep, f, indent=1)
        console.print(f"wrote {args.json}")
    if args.plot:
        plot(rep, args.plot)
        console.print(f"wrote {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
