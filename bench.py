"""Check and time solutions on the task's workloads: `python bench.py SOLUTION [SOLUTION ...]`.

Who runs what. This process is the judge: it never imports a solution. Per solution and world it starts one
process per rank (harness/rank/worker.py; torchrun's environment, env:// rendezvous, NCCL on GPUs with rank r on GPU r,
gloo on the CPU). A rank maps the judge's tensors (weights, latents, out), locks itself down (Landlock: it reads
the interpreter, site-packages, the solution, spec.py and reference.py, and writes only its own scratch folder,
deleted after the run), then imports the solution and calls `prepare` once (untimed). From then on everything in
that process is the solution's: the judge trusts no line of it except the fact that `done` arrived.

Timing (per call; the method, in harness/judge/group.py):
  1. Before the clock: the latents staged on every rank's device (a timed call's are fresh: a secret seed), `out`
     poisoned with NaN, the pipes quiet.
  2. The judge's clock (CLOCK_MONOTONIC_RAW) starts; it copies the latents into the ranks' buffers and writes `go`.
  3. The clock stops when the judge has read and checked the last rank's `done` (a rank writes it after run()
     returned and its devices were synchronised; the judge's time to read the lines counts). A rank's own stamps
     are diagnostics only.
  4. The judge reads `out` at once and judges that copy; it reads `out` again after the figures: a change means a
     rank said `done` before its work was finished (tampering).
  Warm-up calls (checked like the rest) precede the timed ones. Timed calls repeat until the standard error of the
  median is under 0.5% of it after at least --min-reps, or until --time-cap seconds of calls, or --max-reps (20 on
  GPUs; 5 on the CPU, whose tiny geometry's times say nothing of a GPU and where the judge's fp32 decodes of the fresh
  latents take most of the run).

Checking (every call, in the judge): every element finite and in [-1, 1] (NaN left from the poison means an
unwritten element); max|d| and rms(d) within the allowance against the fp32 reference (stored latents) or the
judge's own decode of the fresh latents (fp32 on the CPU; on GPUs the release bf16 decode, the allowance widened by
its error); PSNR shown; z and the weights unchanged; exactly one `done` (with the call's nonce) and one `report` line
per rank and call; no process left running; no decoy reference read; calls on the stored latents not faster than
warm calls on fresh latents beyond noise, after a second look (two more fresh calls) where they seem to be or no
warm fresh call was timed; the call's time not below the roofline (bounds.impossible). The ranks also report
threads left running and replaced functions of torch, time and builtins, and a precision census of what prepare
returned (a second line: it can only fail a call). From the end of its start or call to its next call a group is
parked: on GPUs its ranks' CUDA held by the driver's lock (harness/isolation/cuda_lock.py), so GPU work they queued ran
before any other call, then every process of it frozen (its cgroup, or SIGSTOP); a process beside the ranks then fails
it.

Memory: each rank's torch.cuda.max_memory_allocated, reset before every call, plus the call's latents and (rank 0)
out, which the judge lends. A workload's peak is the largest over its calls, warm-up included.

Profiling (--profile DIR): after a workload's calls, one more call (checked, not counted) per rank runs under
torch.profiler with reference's named scopes on; each rank's Chrome trace is copied to DIR and the per-scope table
printed. `bench.py --scopes TRACE ...` prints the table of saved traces.

Error maps (harness/report/error_maps.py): a call whose video fails the check (every call with --maps) is mapped from
the judge's copy of out: where the errors are (the worst frame, rows named after the band seams of spec.bands, columns),
in the console's `where:` line and the JSON's `error_map`, and drawn as a PNG (matplotlib, the plot extra; without it
the console says so) into error-maps/<UTC time>-<pid>/ under the working directory, made when the first is drawn. With
--report DIR they go into DIR/maps, and DIR/index.html is written (harness/report/html.py: statuses, A/B verdicts, error
maps, rooflines, scope charts, the environment), a static page.

Under torchrun (`torchrun --nproc-per-node N bench.py ...`) rank 0 runs the whole bench as above, on the GPUs it
sees, and the other launched processes wait for it and exit: a judge must own the ranks it judges.

Statuses: passed, incorrect, input modified, tampering, runtime error, crash, timeout, build error, load error,
invalid timing (no longer given: the judge's clock is the only one), impossible (faster than the roofline allows),
skipped, harness error.
"""
import argparse
import json
import os
import sys

import spec
from harness.isolation import procs
from harness.judge import checks, hardware
from harness.judge.checks import STATUSES  # noqa: F401 (bench.STATUSES)
from harness.report import console as console_module, html, plot, profile

MAX_REPS, MAX_REPS_CPU = 20, 5      # timed calls at most per workload and solution, by default


def parse_args(argv):
    p = argparse.ArgumentParser(description="Check and time solutions on the task's workloads.")
    p.add_argument("solutions", nargs="+", help="solution directories or .py files")
    p.add_argument("--workloads", help=f"comma list of workloads (default: all {len(spec.WORKLOADS)})")
    p.add_argument("--worlds", help="comma list of world sizes to keep (1, 2, 4)")
    p.add_argument("--tiny", action="store_true", help="the tiny geometry on the CPU (gloo), for any machine")
    p.add_argument("--json", help="write every figure, sample and status here")
    p.add_argument("--warmup", type=int, default=1, help="warm-up calls per timed workload (checked, not timed; "
                                                                  "default: 1)")
    p.add_argument("--min-reps", type=int, default=3, help="timed calls at least (default: 3)")
    p.add_argument("--max-reps", type=int, help=f"timed calls at most (default {MAX_REPS} on GPUs, {MAX_REPS_CPU} "
                                                 f"on the CPU)")
    p.add_argument("--time-cap", type=float, default=60.0, help="seconds of timed calls per workload and solution "
                                                                      "(default: 60)")
    p.add_argument("--timeout-scale", type=float, default=1.0, help="scale the per-call timeouts (default: 1)")
    p.add_argument("--at-once", type=int, metavar="N", help="solutions whose calls interleave, their groups alive at "
                                                            "once (default: as many as GPU memory lets each keep 24 "
                                                            "GiB; all on the CPU); more run in waves, one after another")
    p.add_argument("--no-make", action="store_true", help="fail instead of making missing data")
    p.add_argument("--no-isolation", action="store_true", help="run the ranks without the sandbox (said in the "
                                                               "output and the JSON)")
    p.add_argument("--profile", metavar="DIR", help="after a workload's calls, profile one more call per rank with "
                                                     "the named scopes on: Chrome traces and a per-scope table in DIR")
    html.add_arguments(p, "workloads")
    args = p.parse_args(argv)
    for name, value, least in (("--warmup", args.warmup, 0), ("--min-reps", args.min_reps, 1),
                               ("--at-once", args.at_once, 1), ("--max-reps", args.max_reps, max(1, args.min_reps))):
        if value is not None and value < least:
            p.error(f"{name} must be at least {least} (got {value})")
    if not (args.time_cap > 0 and args.timeout_scale > 0):
        p.error(f"--time-cap and --timeout-scale must be positive (got {args.time_cap:g}, {args.timeout_scale:g})")
    return args


def plan(args, console, gpus, cpu):
    """(workloads to run, workloads skipped) or None after an error message."""
    try:
        workloads = spec.workloads_named(args.workloads)
    except ValueError as e:
        console.print(str(e), style="red")
        return None
    if args.worlds:
        keep = {int(x) for x in args.worlds.split(",")}
        workloads = [w for w in workloads if spec.WORKLOADS[w].world in keep]
    skipped = [w for w in workloads if not cpu and spec.WORKLOADS[w].world > gpus]
    for w in skipped:
        console.print(f"skip {w}: it needs {spec.WORKLOADS[w].world} GPUs, {gpus} visible", style="yellow")
    return [w for w in workloads if w not in skipped], skipped


def _unique(name, solutions):
    """`name`, or `name#k` with the first k that no solution before has (a folder may itself be named `x#1`)."""
    taken, k, out = {s["name"] for s in solutions}, len(solutions), name
    while out in taken:
        out, k = f"{name}#{k}", k + 1
    return out


def describe(args, console, rank0):
    """The solutions, described and built (in a locked-down child process with a time limit); one that cannot be
    described carries its `load_error`, and the others still run."""
    import loader
    from rich.text import Text
    from harness.judge.session import excluded
    solutions = []
    for path in args.solutions:
        try:
            d = loader.describe(path)
        except loader.SolutionError as e:       # that solution's failure: the others still run
            console.print(Text(console_module.quote(e, console.width), style="red"), soft_wrap=True)
            solutions.append({"name": _unique(loader.plain_name(path), solutions), "path": os.path.abspath(path),
                              "hash": None,
                              "build_error": None, "load_error": console_module.plain(str(e)), "desc": None})
            continue
        sol = {"name": d.name, "path": d.path, "hash": d.content_hash, "build_error": None, "desc": d}
        if d.manifest.get("sources") and rank0:
            console.print(f"building {d.name} ...")
            err = loader.build_in_child(d.path, timeout=1200, exclude=excluded(not args.no_isolation))
            sol["build_error"] = console_module.plain(err) if err else None
            if sol["build_error"]:
                said = f"{d.name}: build error: {sol['build_error']}"
                console.print(Text(console_module.quote(said, console.width), style="red"), soft_wrap=True)
        sol["name"] = _unique(sol["name"], solutions)
        solutions.append(sol)
    return solutions


def under_torchrun():
    """Launched by torchrun: rank 0 runs the bench; the others wait on torchrun's store until it is done."""
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="env://")
    return dist


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--scopes"]:
        return profile.scopes_main(argv[1:])
    args = parse_args(argv)
    procs.mark_judge()      # before the data maker starts its workers
    if args.report and not plot.available():
        print(f"--report {plot.MISSING}", file=sys.stderr)
        return 2
    torchrun = "RANK" in os.environ and "TORCHELASTIC_RUN_ID" in os.environ
    rank0 = not torchrun or os.environ["RANK"] == "0"
    dist = under_torchrun() if torchrun else None
    if not rank0:
        dist.barrier()
        dist.destroy_process_group()
        return 0
    try:
        return bench(args, console_module.console())
    finally:
        if dist is not None:
            dist.barrier()
            dist.destroy_process_group()


def bench(args, console):
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.text import Text
    from harness.judge.bench_plan import BenchPlan
    from harness.judge.breakdown import Breakdown
    from harness.judge.session import Session
    gpus, gpu_name = (0, None) if args.tiny else hardware.detect_gpus()
    cpu = args.tiny or gpus == 0
    hardware.one_thread_on_the_cpu(cpu)
    if cpu and not args.tiny:
        console.print("No CUDA GPU is visible: running the TINY geometry on the CPU (gloo). Its times say nothing "
                      "about a GPU; pass --tiny to choose this explicitly.", style="yellow")
    geometry = spec.TINY if cpu else spec.FULL
    if args.max_reps is None:
        args.max_reps = max(args.min_reps, MAX_REPS_CPU if cpu else MAX_REPS)
    args.gpus, args.gpu_name, args.gpu_key = gpus, gpu_name, hardware.gpu_key(gpu_name)
    breakdown = Breakdown()
    planned = plan(args, console, gpus, cpu)
    with breakdown.part("builds"):
        solutions = describe(args, console, True) if planned else None
    if not solutions:
        return 2
    workloads, skipped = planned
    clips = sorted({spec.WORKLOADS[w].clip for w in workloads} | {"f1"}, key=list(spec.CLIPS).index)
    try:
        if args.no_make:
            for c in clips:
                spec.load_reference(c, geometry), spec.calibration(c, geometry)
        else:
            import data.make
            with breakdown.part("data"):
                data.make.ensure(clips, geometry)
    except ValueError as e:
        console.print(f"data: {e}", style="red")
        return 2
    results = {s["name"]: {} for s in solutions}
    # By world (a group per world), timed workloads first: a shorter clip is a prefix of a longer one's source, and
    # a process that saw it could tell the timed workload's stored call from its fresh ones.
    order = sorted(workloads, key=lambda w: (spec.WORKLOADS[w].world, not spec.WORKLOADS[w].timed,
                                             list(spec.WORKLOADS).index(w)))
    frames = {spec.WORKLOADS[w].latent_frames for w in order}
    run = Session(geometry, cpu, isolation=not args.no_isolation)
    runner = None
    try:
        sampler = hardware.ClockSampler(0 if cpu else gpus)
        runner = BenchPlan(args, solutions, geometry, cpu, console, run, sampler, breakdown)
        waves = runner.waves(frames)
        label = f"{geometry.name} geometry on the {'CPU (gloo)' if cpu else f'GPU ({gpus} x {gpu_name})'}"
        for n, wave in enumerate(waves):
            runner.start_wave(wave, frames)
            part = f" (wave {n + 1} of {len(waves)}: at most {runner.at_once} solutions at once)" if len(waves) > 1 \
                else ""
            console.print(Text.assemble(("bench", "bold"), f" {', '.join(s['name'] for s in wave)}{part}: "
                                                           f"{len(workloads)} workloads, {label}; isolation: "
                                                           f"{run.isolation}"))
            with Progress(TextColumn("{task.description}"), BarColumn(),
                          TextColumn("{task.completed}/{task.total} calls"), TimeElapsedColumn(), console=console,
                          transient=True) as progress:
                overall = progress.add_task("workloads", total=len(order))
                for i, w in enumerate(order):
                    for name, rec in runner.run_workload(w, frames, progress).items():
                        results[name][w] = rec
                        console.print(console_module.line(name, rec, len(solutions) > 1, console.width),
                                      soft_wrap=True)
                    progress.advance(overall)
                    # Groups are per world: close them once the last workload of their world is done.
                    if i + 1 == len(order) or spec.WORKLOADS[order[i + 1]].world != spec.WORKLOADS[w].world:
                        runner.close()
    finally:
        if runner is not None:
            runner.close()
        run.close()
    for w in skipped:
        for s in solutions:
            results[s["name"]][w] = {"workload": w, "world": spec.WORKLOADS[w].world,
                                     "timed": spec.WORKLOADS[w].timed, "status": "skipped", "passed": False,
                                     "median_s": None, "reason": f"needs {spec.WORKLOADS[w].world} GPUs, "
                                                                 f"{gpus} visible"}
    for s in solutions:
        s.pop("desc", None)
    out = {"schema_version": console_module.SCHEMA_VERSION,
           **console_module.report(console, solutions, results, geometry, cpu)}
    out["environment"] = console_module.environment(gpus, cpu, runner.info, solutions, geometry, run.isolation)
    out["statuses"] = checks.STATUSES
    out["method"] = {"warmup": args.warmup, "min_reps": args.min_reps, "max_reps": args.max_reps,
                     "at_once": runner.at_once,
                     "time_cap_s": args.time_cap, "stop": "se(median) <= 0.5% of the median",
                     "clock": "the judge's, from before the latents are placed to the last rank's done, read and checked"}
    if said := runner.atlas.said():
        console.print(said)
    out["time_s"] = breakdown.as_dict()
    console.print(breakdown.said())
    if args.json:
        tmp = args.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump(out, f, indent=1, default=str)
        os.replace(tmp, args.json)
        console.print(f"wrote {args.json}")
    if args.report:
        console.print(f"wrote {html.bench_page(args.report, out, geometry, cpu, args.gpu_key)}")
    ok = all(r["status"] in ("passed", "skipped") for res in results.values() for r in res.values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
