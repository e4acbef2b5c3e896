"""Check and time solutions on the task's workloads: `python bench.py SOLUTION [SOLUTION ...]`.

Under torchrun (`torchrun --nproc-per-node N bench.py SOLUTION ...`, or a scheduler setting the env:// variables)
every launched rank runs this command, rank 0 drives the others in-process and the workloads of world N run;
there the process group's timeout and the launcher end a hang, and the stamps are checked against rank 0's clock.

Processes. The parent (this command) never imports a solution. Per solution and world it starts one process per
rank with torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT; env:// rendezvous),
NCCL on GPUs (rank r on GPU r) and gloo on the CPU, plus a gloo group of the harness's own for barriers and
gathers. Each rank loads the solution, calls `prepare` once (untimed), then serves calls. Rank 0 reads the
parent's commands from a pipe and broadcasts them; every rank writes its results to a pipe of its own, so the
parent hears a failing rank even while the others are stuck in a collective. A call that outlives its timeout, an
exception or a dead rank ends that process group (killed as a whole: no orphans); the next workload gets a new one.

Timing (per call; the method):
  1. Before the window, on every rank: inputs in place, `out` poisoned with NaN, device synchronised.
  2. A CPU barrier (gloo), then each rank stamps t0 (CLOCK_MONOTONIC, common to the host's processes).
  3. run(z, weights, rank, world, pg, out); then a device synchronise on every rank; each rank stamps t1.
  4. The call's time is max(t1) - min(t0) over the ranks. The parent stamps when it sent the command and when the
     results came back; every rank's stamps must lie inside that window and the parent's span may exceed the
     call's by at most max(50 ms, 5%), else the call is invalid. Statistics are computed here, in the parent.
  Warm-up calls (checked like the rest) precede the timed ones. Timed calls repeat until the standard error of
  the median is under 0.5% of it (about a 1% half-width at 95%) after at least --min-reps, or until --time-cap
  seconds of calls, or --max-reps. The working set (GBs) is far beyond L2, so no cache flush between calls.

Checking (every call, warm-up and timed): `out`'s storage, shape and strides unchanged; z and the weights
unchanged; every element finite and in [-1, 1] (NaN left from the poison means an unwritten element); max|d| and
rms(d) against the fp32 reference within spec.allowance; PSNR shown.

Also after every call: no thread or child process the call started is still running, and none of the functions the
harness relies on (timers, synchronisation, collectives, comparisons) was replaced.

Memory: each rank's torch.cuda.max_memory_allocated, reset before every call. A workload's peak is the largest
over its calls, warm-up included: a first call that makes cuDNN try its algorithms (benchmark mode) may peak
higher than the timed ones. Every call's own peaks are in the JSON.

Profiling (--profile DIR): after a workload's calls, one more call (checked, not counted) per rank runs under
torch.profiler with reference's named scopes on; each rank writes a Chrome trace and the per-scope table is printed.

Statuses: passed, incorrect, input modified, tampering, runtime error, crash, timeout, build error, load error,
invalid timing, impossible (ci.py: faster than the roofline allows), skipped, harness error.
"""
import argparse
import datetime
import hashlib
import json
import math
import os
import platform
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

import spec

ROOT = os.path.dirname(os.path.abspath(__file__))
STATUSES = ("passed", "incorrect", "input modified", "tampering", "runtime error", "crash", "timeout", "build error",
            "load error", "invalid timing", "impossible", "skipped", "harness error")
ENV_SAFETY = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
STARTUP_S = 300.0          # load, build cache, prepare, first-call autotuning


def call_timeout(workload, geometry, cpu, scale=1.0, first=False):
    """Seconds a call may take before it is a timeout: generous, from the workload's FLOPs at a slow rate (the
    first call of a process also gets the time for autotuning and compiling)."""
    flops = spec.bounds(workload, geometry)["flops"]
    rate = 2e9 if cpu else 20e12   # fp32-ish worst cases: a 2-core CPU, an unoptimised GPU decode
    return scale * (60.0 + flops / rate + (STARTUP_S if first else 0.0))


# ----------------------------------------------------------------------------------------------------------------
# Rank side
# ----------------------------------------------------------------------------------------------------------------

class _Rank:
    """One rank's process: solution, data and the harness's groups."""

    def __init__(self, args):
        import torch
        import torch.distributed as dist
        self.torch, self.dist = torch, dist
        self.rank, self.world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        self.geometry = spec.GEOMETRIES[args.geometry]
        self.cpu = args.device == "cpu"
        # Under bench's own launcher results go to a pipe; under torchrun rank 0 drives in-process (LocalGroup).
        self.out_fd = int(os.environ["WAN_BENCH_RESULT_FD"]) if "WAN_BENCH_RESULT_FD" in os.environ else None
        self.cmd_fd = int(os.environ["WAN_BENCH_CMD_FD"]) if self.rank == 0 and self.out_fd is not None else None
        self.outbox = []
        self._cmd_buf = b""
        if self.cpu:
            self.device = torch.device("cpu")
            dist.init_process_group("gloo", init_method="env://")
            self.pg = dist.group.WORLD
            self.hg = dist.new_group(backend="gloo")
        else:
            self.device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", self.rank)))
            torch.cuda.set_device(self.device)
            dist.init_process_group("nccl", init_method="env://", device_id=self.device)
            self.pg = dist.group.WORLD
            self.hg = dist.new_group(backend="gloo")
        self.solution_path = args.solution
        self.refs = {}
        self.watched = _watched(torch)   # before the solution is imported

    # -- pipes
    def send(self, **msg):
        if self.out_fd is None:
            self.outbox.append(dict(json.loads(json.dumps(msg)), at_ns=_clock()))
            if msg.get("type") == "error" and self.rank != 0:   # nobody reads a peer's outbox under torchrun
                print(f"rank {self.rank}: {msg['status']}: {msg['error']}", file=sys.stderr, flush=True)
            return
        data = (json.dumps(msg) + "\n").encode()
        while data:
            data = data[os.write(self.out_fd, data):]

    def read_command(self):
        while b"\n" not in self._cmd_buf:
            chunk = os.read(self.cmd_fd, 65536)
            if not chunk:
                return {"op": "quit"}
            self._cmd_buf += chunk
        line, self._cmd_buf = self._cmd_buf.split(b"\n", 1)
        return json.loads(line)

    def command(self, cmd=None):
        """Rank 0's command (from the parent's pipe, or `cmd` when rank 0 drives) broadcast to every rank."""
        box = [(cmd or self.read_command()) if self.rank == 0 else None]
        self.dist.broadcast_object_list(box, src=0, group=self.hg)
        return box[0]

    def sync(self):
        """Wait for this rank's device, and for every other device the process has touched (a primary context
        exists), so work sent to another GPU cannot escape the timer."""
        if self.cpu:
            return
        torch = self.torch
        for d in range(torch.cuda.device_count()):
            if d == self.device.index or torch._C._cuda_hasPrimaryContext(d):
                torch.cuda.synchronize(d)

    # -- life
    def serve(self):
        if self.start():
            self.loop()

    def loop(self):
        while True:
            cmd = self.command()
            if cmd["op"] == "quit":
                return
            getattr(self, cmd["op"])(cmd)

    def start(self):
        """Load the solution, its weights and prepare; False (after reporting why) when that fails."""
        import loader
        torch = self.torch
        info = {"rank": self.rank, "device": str(self.device), "torch": torch.__version__}
        if not self.cpu:
            info.update(gpu=torch.cuda.get_device_name(self.device), cudnn=torch.backends.cudnn.version(),
                        nccl=str(torch.cuda.nccl.version()))
        try:
            import triton
            info["triton"] = triton.__version__
        except ImportError:
            info["triton"] = None
        try:
            solution = loader.load(self.solution_path)
        except Exception as e:
            self.send(type="error", status="load error", rank=self.rank, error=_short(e), trace=traceback.format_exc())
            return False
        weights = spec.load_weights(self.device, self.geometry)
        t0 = time.perf_counter()
        if solution.prepare is not None:
            try:
                prepared = solution.prepare(weights, self.rank, self.world, self.pg)
                self.sync()
            except Exception as e:
                self.send(type="error", status="runtime error", rank=self.rank, phase="prepare", error=_short(e),
                          trace=traceback.format_exc())
                return False
            if not isinstance(prepared, (list, tuple)) or not all(isinstance(t, torch.Tensor) for t in prepared):
                self.send(type="error", status="runtime error", rank=self.rank, phase="prepare",
                          error=f"prepare returned {type(prepared).__name__}, expected a list of tensors")
                return False
            weights = list(prepared)
        info["prepare_s"] = time.perf_counter() - t0
        patched = self.patched()
        if patched:
            self.send(type="error", status="tampering", rank=self.rank, phase="load or prepare",
                      error=f"replaced {', '.join(patched)}")
            return False
        self.run, self.weights = solution.run, weights
        # Host copies (copy=True: on the CPU .cpu() would alias), so they are not in the GPU's peak.
        self.weights_copy = [w.detach().to("cpu", copy=True) for w in weights]
        self.send(type="ready", **info)
        return True

    def setup(self, cmd):
        """Before the window: this call's inputs, `out` poisoned with NaN, the layout to hold it to. The gate
        (ci.py) may pass its own latents (`z_path`) and take `out` back (`dump_path`) to check it itself."""
        torch = self.torch
        workload = cmd["workload"]
        if cmd.get("z_path"):
            z = torch.load(cmd["z_path"], map_location="cpu", weights_only=True).to(self.device).contiguous()
            shape = (1, 3, spec.frames(z.shape[2]), 16 * z.shape[3], 16 * z.shape[4])
        else:
            z, = spec.make_inputs(workload, self.device, self.geometry)
            shape = spec.output_shape(workload, self.geometry)
        out = torch.empty(shape if self.rank == 0 else (0,), dtype=torch.bfloat16, device=self.device)
        out.fill_(float("nan"))
        self.armed = {"workload": workload, "z": z, "z_copy": z.detach().to("cpu", copy=True), "out": out,
                      "layout": self.layout(out), "dump_path": cmd.get("dump_path"), "profile": cmd.get("profile")}
        self.sync()
        self.dist.barrier(group=self.hg)
        if self.rank == 0:
            self.send(type="armed", workload=workload)

    @staticmethod
    def layout(out):
        return (out.untyped_storage().data_ptr(), out.data_ptr(), tuple(out.shape), out.stride(), out.dtype)

    def patched(self):
        return [label for label, owner, attr, original in self.watched if getattr(owner, attr, None) is not original]

    def call(self, cmd):
        """The timed window (barrier, stamp, run, device sync, stamp), then the checks outside it."""
        torch, dist = self.torch, self.dist
        a, self.armed = self.armed, None
        z, out = a["z"], a["out"]
        if not self.cpu:
            torch.cuda.reset_peak_memory_stats(self.device)
        threads, children = {t.ident for t in threading.enumerate()}, _children()
        profiler = self.profiler(a["profile"])
        if profiler is not None:
            profiler.start()   # before the window: starting the profiler takes a while
        dist.barrier(group=self.hg)
        t0 = _clock()
        try:
            self.run(z, self.weights, self.rank, self.world, self.pg, out)
            self.sync()
        except Exception as e:
            self.send(type="error", status="runtime error", rank=self.rank, error=_short(e),
                      trace=traceback.format_exc())
            return   # the parent ends the group: peers may be stuck in a collective
        t1 = _clock()
        scopes = self.profiled(profiler, a["profile"], (t1 - t0) / 1e9) if profiler is not None else None
        peak = None if self.cpu else torch.cuda.max_memory_allocated(self.device)
        left = [t.name for t in threading.enumerate() if t.ident not in threads and t.is_alive()]
        spawned = sorted(_children() - children)
        stamps = [None] * self.world
        dist.all_gather_object(stamps, {"rank": self.rank, "t0": t0, "t1": t1, "peak": peak}, group=self.hg)
        if self.rank == 0:
            self.send(type="timed", call=cmd["call"], stamps=stamps)
        problems = []
        if left:
            problems.append(("tampering", f"rank {self.rank}: threads left running after the call: {left}"))
        if spawned:
            problems.append(("tampering", f"rank {self.rank}: processes left running after the call: {spawned}"))
        patched = self.patched()
        if patched:
            problems.append(("tampering", f"rank {self.rank}: replaced {', '.join(patched)}"))
        if self.layout(out) != a["layout"]:
            problems.append(("incorrect", "out's storage, shape or strides changed"))
        if not torch.equal(z.cpu(), a["z_copy"]):
            problems.append(("input modified", "z was modified"))
        if not all(torch.equal(x.cpu(), y) for x, y in zip(self.weights, self.weights_copy)):
            problems.append(("input modified", "the weights were modified"))
        figures = None
        if self.rank == 0 and a["dump_path"]:
            torch.save(out.detach().cpu(), a["dump_path"])
        elif self.rank == 0 and not problems:
            figures = self.check(a["workload"], out)
        found = [None] * self.world
        dist.all_gather_object(found, (problems, scopes), group=self.hg)
        if self.rank == 0:
            self.send(type="result", call=cmd["call"], problems=[p for f, _ in found for p in f], figures=figures,
                      profile=[s for _, s in found] if a["profile"] else None)

    def profiler(self, prefix):
        """A torch.profiler over the call with the named scopes on (reference.set_scopes), or a null context."""
        if not prefix:
            return None
        import reference
        from torch.profiler import ProfilerActivity, profile
        reference.set_scopes(True)
        acts = [ProfilerActivity.CPU] + ([] if self.cpu else [ProfilerActivity.CUDA])
        return profile(activities=acts)

    def profiled(self, prof, prefix, seconds):
        """Write this rank's Chrome trace; return its per-scope table (and, on GPUs, communication overlap)."""
        import reference
        prof.stop()
        reference.set_scopes(False)
        path = f"{prefix}-rank{self.rank}.json"
        prof.export_chrome_trace(path)
        events = read_trace(path)
        return {"rank": self.rank, "trace": path, "call_s": seconds, "scopes": scope_table(events),
                "communication": None if self.cpu else overlap(events)}

    def check(self, workload, out):
        """Figures of out against the clip's fp32 reference."""
        clip = spec.WORKLOADS[workload]["clip"]
        if clip not in self.refs:
            self.refs = {clip: spec.load_reference(clip, self.geometry)}
        return compare(out, self.refs[clip], self.device)


SCOPE_ROOTS = ("decoder", "post_quant_conv", "unpatchify", "halo_exchange", "gather")


GPU_WORK = ("kernel", "gpu_memcpy", "gpu_memset")


def gpu_work(events):
    """A trace's kernels, copies and memsets (complete events)."""
    return [e for e in events if e.get("cat") in GPU_WORK and e.get("ph") == "X"]


def read_trace(path):
    """The events of a Chrome trace that torch.profiler exported (plain or gzipped JSON)."""
    import gzip
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        data = json.load(f)
    return data["traceEvents"] if isinstance(data, dict) else data


def scope_table(events):
    """[{"scope", "total_s", "self_s"}] of the named scopes in a trace's events, in the order the decode runs them.

    Where the trace has GPU work, a scope's self time is the summed duration of the kernels, copies and memsets
    inside its GPU ranges (`gpu_user_annotation` events on the same device; the profiler gives each piece of GPU
    work to the innermost scope only), and its total adds the self times of the scopes below it in the path
    hierarchy (a scope with no work of its own still gets a row). Without GPU work the total is the CPU time of its
    ranges (`user_annotation`) and self time is the total less that of the scopes directly inside it."""
    import bisect
    work = sorted(gpu_work(events), key=lambda e: e["ts"])
    gpu = bool(work)
    by_pid = {}
    for e in work:
        by_pid.setdefault(e.get("pid"), []).append(e)
    starts = {pid: [e["ts"] for e in es] for pid, es in by_pid.items()}
    cat = "gpu_user_annotation" if gpu else "user_annotation"
    rows, first = {}, {}
    for a in events:
        if a.get("cat") != cat or a.get("ph") != "X" or not str(a.get("name", "")).startswith(SCOPE_ROOTS):
            continue
        name, t0, t1 = a["name"], a["ts"], a["ts"] + a["dur"]
        if gpu:
            es, ss = by_pid.get(a.get("pid"), []), starts.get(a.get("pid"), [])
            total, i = 0.0, bisect.bisect_left(ss, t0)
            while i < len(es) and es[i]["ts"] < t1:
                if es[i]["ts"] + es[i]["dur"] <= t1:
                    total += es[i]["dur"]
                i += 1
        else:
            total = a["dur"]
        rows[name] = rows.get(name, 0.0) + total / 1e6
        first[name] = min(first.get(name, t0), t0)
    table = []
    if gpu:
        for name in list(rows):            # the path's ancestors, with no work of their own
            parts = name.split("/")
            for k in range(1, len(parts)):
                up = "/".join(parts[:k])
                rows.setdefault(up, 0.0)
                first[up] = min(first.get(up, first[name]), first[name])
        for name, own in rows.items():
            total = sum(v for n, v in rows.items() if n == name or n.startswith(name + "/"))
            table.append({"scope": name, "total_s": total, "self_s": own})
    else:
        for name, total in rows.items():
            children = [n for n in rows if n.startswith(name + "/") and "/" not in n[len(name) + 1:]]
            table.append({"scope": name, "total_s": total,
                          "self_s": max(0.0, total - sum(rows[c] for c in children))})
    return sorted(table, key=lambda r: (first[r["scope"]], r["scope"].count("/")))


def trace_span(events):
    """Seconds from the first to the last GPU work of a trace (without GPU work: of its named scopes)."""
    work = gpu_work(events)
    if not work:
        work = [e for e in events if e.get("cat") == "user_annotation" and e.get("ph") == "X"
                and str(e.get("name", "")).startswith(SCOPE_ROOTS)]
    if not work:
        return 0.0
    return (max(e["ts"] + e["dur"] for e in work) - min(e["ts"] for e in work)) / 1e6


def scopes_main(paths):
    """`bench.py --scopes TRACE [TRACE ...]`: the per-scope table of traces that --profile wrote (the ranks of one
    call, rank 0 first), without running anything."""
    from rich.console import Console
    if not paths:
        print("usage: bench.py --scopes TRACE [TRACE ...]", file=sys.stderr)
        return 2
    ranks = []
    for i, path in enumerate(paths):
        try:
            events = read_trace(path)
        except (OSError, ValueError, KeyError) as e:
            print(f"cannot read trace {path}: {e}", file=sys.stderr)
            return 2
        gpu = bool(gpu_work(events))
        ranks.append({"rank": i, "trace": path, "call_s": trace_span(events) or 1.0, "scopes": scope_table(events),
                      "communication": overlap(events) if gpu else None})
    prof = {"time_s": ranks[0]["call_s"], "ranks": ranks}
    Console(width=None if sys.stdout.isatty() else 160).print(profile_report("trace", "", prof))
    return 0


def overlap(events):
    """{"communication_s", "hidden_s", "exposed_s"} of a trace: GPU time covered by NCCL kernels, the part of it
    covered by other GPU work at the same time, and the part with nothing beside it."""
    comm, comp = [], []
    for e in gpu_work(events):
        (comm if "nccl" in str(e.get("name", "")).lower() else comp).append((e["ts"], e["ts"] + e["dur"]))

    def union(iv):
        out = []
        for a, b in sorted(iv):
            if out and a <= out[-1][1]:
                out[-1][1] = max(out[-1][1], b)
            else:
                out.append([a, b])
        return out
    comm, comp = union(comm), union(comp)
    total = sum(b - a for a, b in comm)
    hidden, j = 0.0, 0
    for a, b in comm:                      # both lists sorted and disjoint: one sweep
        while j < len(comp) and comp[j][1] <= a:
            j += 1
        k = j
        while k < len(comp) and comp[k][0] < b:
            hidden += min(b, comp[k][1]) - max(a, comp[k][0])
            k += 1
    return {"communication_s": total / 1e6, "hidden_s": hidden / 1e6, "exposed_s": (total - hidden) / 1e6}


def compare(out, ref, device):
    """{"max_abs", "rms", "psnr_db", "nonfinite", "outside"} of a video against its reference, frame chunk by frame
    chunk, in fp32 on `device`; non-finite elements are counted and left out of the differences."""
    import torch
    n, sq, max_abs, nonfinite, outside = 0, 0.0, 0.0, 0, 0
    step = max(1, (1 << 27) // (ref[0, 0, 0].numel() * 3))
    for f in range(0, ref.shape[2], step):
        o = out[:, :, f:f + step].to(device).float()
        r = ref[:, :, f:f + step].to(device).float()
        finite = torch.isfinite(o)
        nonfinite += int((~finite).sum())
        outside += int((o.abs() > 1).sum())
        d = torch.where(finite, o - r, torch.zeros_like(o))
        sq += float((d.double() ** 2).sum())
        max_abs = max(max_abs, float(d.abs().max()))
        n += o.numel()
    mse = sq / n
    return {"max_abs": max_abs, "rms": math.sqrt(mse), "psnr_db": 10 * math.log10(4 / mse) if mse > 0 else math.inf,
            "nonfinite": nonfinite, "outside": outside}


def timing_of(stamps, window):
    """A call's time (earliest rank start to latest rank end), per-rank spans and peaks, checked against the
    parent's own window: every stamp inside it, and the window at most max(50 ms, 5%) longer."""
    t0, t1 = min(s["t0"] for s in stamps), max(s["t1"] for s in stamps)
    call = {"time_s": (t1 - t0) / 1e9, "parent_s": (window[1] - window[0]) / 1e9,
            "rank_s": [(s["t1"] - s["t0"]) / 1e9 for s in stamps],
            "start_skew_s": (max(s["t0"] for s in stamps) - t0) / 1e9,
            "peak_bytes": [s["peak"] for s in stamps], "status": "passed", "reason": None}
    if not (window[0] <= t0 <= t1 <= window[1]) or call["parent_s"] - call["time_s"] > max(0.05, 0.05 * call["time_s"]):
        call.update(status="invalid timing", reason=f"rank stamps {call['time_s']:.4f} s disagree with the parent's "
                                                    f"window {call['parent_s']:.4f} s")
    return call


def verdict_of(figures, allow):
    """(status, reason) of a call's figures against an allowance {"max_abs", "rms"}."""
    f, reasons = figures, []
    if f["nonfinite"]:
        reasons.append(f"{f['nonfinite']} elements not finite (NaN is the poison: unwritten elements)")
    if f["outside"]:
        reasons.append(f"{f['outside']} elements outside [-1, 1]")
    if f["max_abs"] > allow["max_abs"]:
        reasons.append(f"max|d| {f['max_abs']:.4g} > allowance {allow['max_abs']:.4g}")
    if f["rms"] > allow["rms"]:
        reasons.append(f"rms(d) {f['rms']:.4g} > allowance {allow['rms']:.4g}")
    return ("incorrect", "; ".join(reasons)) if reasons else ("passed", None)


_clock = time.monotonic_ns   # bench's timer, bound before any solution is imported


def _watched(torch):
    """(label, owner, attribute, original) of the functions the harness relies on, to detect replacements."""
    import builtins
    import torch.distributed as dist
    names = [(time, "time", ("perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time", "time_ns",
                             "sleep")),
             (torch, "torch", ("equal", "isfinite", "empty", "load", "save", "where")),
             (torch.Tensor, "torch.Tensor", ("copy_", "fill_", "data_ptr", "untyped_storage", "stride", "cpu", "to",
                                             "float", "abs", "max", "sum", "__sub__", "__eq__")),
             (torch.cuda, "torch.cuda", ("synchronize", "max_memory_allocated", "reset_peak_memory_stats", "Event")),
             (torch.cuda.Event, "torch.cuda.Event", ("elapsed_time", "record", "synchronize")),
             (dist, "torch.distributed", ("barrier", "all_gather_object", "broadcast_object_list", "all_reduce",
                                          "broadcast", "all_gather")),
             (spec, "spec", ("allowance", "make_inputs", "load_reference", "output_shape", "bounds", "frames")),
             (os, "os", ("write", "read")), (json, "json", ("dumps", "loads")),
             (builtins, "builtins", ("open", "print", "len", "max", "min", "abs", "isinstance", "sorted"))]
    return [(f"{label}.{a}", owner, a, getattr(owner, a)) for owner, label, attrs in names for a in attrs
            if hasattr(owner, a)]


def _children():
    """Live child processes of this process (Linux /proc)."""
    pids = set()
    for task in os.listdir("/proc/self/task") if os.path.isdir("/proc/self/task") else []:
        try:
            with open(f"/proc/self/task/{task}/children") as f:
                pids.update(int(p) for p in f.read().split())
        except OSError:
            pass
    return pids


def _short(e):
    text = f"{type(e).__name__}: {e}"
    return text if len(text) < 2000 else text[:2000] + " ..."


def worker_main(argv):
    p = argparse.ArgumentParser()
    p.add_argument("--worker", action="store_true")
    p.add_argument("--solution", required=True)
    p.add_argument("--geometry", default="full")
    p.add_argument("--device", default="cuda")
    args = p.parse_args(argv)
    rank = None
    try:
        r = _Rank(args)
        rank = r
        r.serve()
    except Exception as e:
        msg = {"type": "error", "status": "harness error", "rank": int(os.environ.get("RANK", -1)),
               "error": _short(e), "trace": traceback.format_exc()}
        os.write(int(os.environ["WAN_BENCH_RESULT_FD"]), (json.dumps(msg) + "\n").encode())
    finally:
        if rank is not None:
            try:
                rank.dist.destroy_process_group()
            except Exception:
                pass
    # Leave without running atexit hooks or waiting on a solution's stray threads.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# ----------------------------------------------------------------------------------------------------------------
# Parent side
# ----------------------------------------------------------------------------------------------------------------

class GroupFailed(Exception):
    def __init__(self, status, message, rank=None):
        super().__init__(message)
        self.status, self.message, self.rank = status, message, rank


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RankGroup:
    """The rank processes of one solution at one world size."""

    def __init__(self, solution_path, world, geometry, cpu, log_dir, env=None):
        self.world, self.cpu, self.procs, self.logs = world, cpu, [], []
        self.buffers = {}
        env_extra = env
        port = _free_port()
        self.cmd_r, self.cmd_w = os.pipe()
        self.result_fds = []
        for r in range(world):
            res_r, res_w = os.pipe()
            env = dict(os.environ, **(env_extra or {}), **ENV_SAFETY, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(world),
                       LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                       WAN_BENCH_RESULT_FD=str(res_w), PYTHONUNBUFFERED="1")
            env.pop("WAN_BENCH_CMD_FD", None)
            fds = [res_w]
            if r == 0:
                env["WAN_BENCH_CMD_FD"] = str(self.cmd_r)
                fds.append(self.cmd_r)
            if cpu:
                # One thread a rank: OpenMP's spinning threads slow down by 10-50x when ranks share cores.
                env["OMP_NUM_THREADS"] = "1"
            log = open(os.path.join(log_dir, f"rank{r}-{len(os.listdir(log_dir))}.log"), "w")
            self.logs.append(log)
            cmd = [sys.executable, os.path.join(ROOT, "bench.py"), "--worker", "--solution", solution_path,
                   "--geometry", geometry.name, "--device", "cpu" if cpu else "cuda"]
            self.procs.append(subprocess.Popen(cmd, env=env, pass_fds=fds, stdout=log, stderr=subprocess.STDOUT,
                                               stdin=subprocess.DEVNULL, start_new_session=True, cwd=ROOT))
            os.close(res_w)
            self.result_fds.append(res_r)
            self.buffers[res_r] = b""
        os.close(self.cmd_r)
        self.info = self._wait_all("ready", STARTUP_S)

    def _messages(self, limit):
        """Yield (rank, message) for `limit` seconds; raises GroupFailed on a dead rank or at the limit."""
        deadline = time.monotonic() + limit
        while True:
            for fd in self.result_fds:
                while b"\n" in self.buffers[fd]:
                    line, self.buffers[fd] = self.buffers[fd].split(b"\n", 1)
                    yield self.result_fds.index(fd), json.loads(line)
            left = deadline - time.monotonic()
            if left <= 0:
                raise GroupFailed("timeout", f"no answer within {limit:.1f} s")
            ready, _, _ = select.select(self.result_fds, [], [], min(left, 0.5))
            for fd in ready:
                chunk = os.read(fd, 1 << 20)
                if chunk:
                    self.buffers[fd] += chunk
                else:
                    rank = self.result_fds.index(fd)
                    code = self.procs[rank].wait(timeout=5) if self.procs[rank].poll() is None else self.procs[rank].poll()
                    raise GroupFailed("crash", f"rank {rank} died (exit code {code})", rank)
            for rank, p in enumerate(self.procs):
                if p.poll() is not None and not self.buffers[self.result_fds[rank]] and \
                        not select.select([self.result_fds[rank]], [], [], 0)[0]:
                    raise GroupFailed("crash", f"rank {rank} died (exit code {p.returncode})", rank)

    def _wait_all(self, kind, timeout):
        got = {}
        for rank, msg in self._messages(timeout):
            if msg["type"] == "error":
                self._fail_after_error(rank, msg)
            if msg["type"] == kind:
                got[rank] = msg
                if len(got) == self.world:
                    return [got[r] for r in range(self.world)]

    def _fail_after_error(self, rank, msg):
        where = f" in {msg['phase']}" if msg.get("phase") else ""
        raise GroupFailed(msg["status"], f"rank {msg['rank']}{where}: {msg['error']}", msg["rank"])

    def _send(self, **cmd):
        os.write(self.cmd_w, (json.dumps(cmd) + "\n").encode())

    def _expect(self, kind, timeout, call=None):
        for rank, msg in self._messages(timeout):
            if msg["type"] == "error":
                self._fail_after_error(rank, msg)
            if msg["type"] == kind and msg.get("call") == call:
                return msg

    def call(self, workload, index, timeout, **setup):
        """One call on every rank; returns (the parent's window around the timed part, its stamps, the checks).
        `setup` may give the latents (z_path) and ask for out back (dump_path): see _Rank.setup."""
        self._send(op="setup", workload=workload, **setup)
        self._expect("armed", STARTUP_S)
        t_send = time.monotonic_ns()
        self._send(op="call", call=index)
        timed = self._expect("timed", timeout, index)
        t_recv = time.monotonic_ns()
        result = self._expect("result", STARTUP_S, index)
        return (t_send, t_recv), timed["stamps"], result

    def close(self, graceful=True):
        if graceful:
            try:
                os.write(self.cmd_w, (json.dumps({"op": "quit"}) + "\n").encode())
                deadline = time.monotonic() + 20
                for p in self.procs:
                    p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except (OSError, subprocess.TimeoutExpired):
                pass
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        for fd in self.result_fds + [self.cmd_w]:
            try:
                os.close(fd)
            except OSError:
                pass
        for log in self.logs:
            log.close()

    def log_tail(self, rank, n=15):
        try:
            with open(self.logs[rank].name) as f:
                return "".join(f.readlines()[-n:])
        except (OSError, IndexError, TypeError):
            return ""


class ClockSampler:
    """SM clocks and clock-event (throttle) reasons of the GPUs, sampled by NVML in a thread of the parent."""
    FLAGGED = {0x8: "hw slowdown", 0x20: "sw thermal", 0x40: "hw thermal", 0x80: "hw power brake"}
    NOTED = {0x4: "sw power cap"}

    def __init__(self, gpus):
        self.handles = []
        try:
            import pynvml
            pynvml.nvmlInit()
            self.nvml = pynvml
            self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(gpus)]
        except Exception:
            self.nvml = None

    def start(self, gpus):
        """Sample GPUs 0 .. gpus-1 (the ones the ranks use) until stop()."""
        self.samples, self.stop_flag = [], threading.Event()
        self.active = self.handles[:gpus]
        if not self.active:
            return
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        n = self.nvml
        reasons = getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None) or n.nvmlDeviceGetCurrentClocksThrottleReasons
        while not self.stop_flag.wait(0.05):
            try:
                self.samples.append([(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM), reasons(h)) for h in self.active])
            except Exception:
                return

    def stop(self):
        if not self.active:
            return None
        self.stop_flag.set()
        self.thread.join()
        if not self.samples:
            return None
        clocks = [c for s in self.samples for c, _ in s]
        mask = 0
        for s in self.samples:
            for _, r in s:
                mask |= r
        flagged = [v for k, v in self.FLAGGED.items() if mask & k]
        return {"sm_mhz_min": min(clocks), "sm_mhz_mean": sum(clocks) / len(clocks),
                "reasons": flagged + [v for k, v in self.NOTED.items() if mask & k], "throttled": bool(flagged)}


def stats(samples):
    s = sorted(samples)
    n = len(s)
    median = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
    mean = sum(s) / n
    std = math.sqrt(sum((x - mean) ** 2 for x in s) / (n - 1)) if n > 1 else 0.0
    return {"n": n, "median_s": median, "mean_s": mean, "min_s": s[0], "max_s": s[-1], "std_s": std,
            "spread": (s[-1] - s[0]) / median if median else 0.0,
            "se_median_s": 1.2533 * std / math.sqrt(n) if n > 1 else math.inf}


def verdict(a, b):
    """Compare solution a's timing stats with b's: (ratio b/a, 'faster' | 'slower' | 'same within noise')."""
    ratio = b["median_s"] / a["median_s"]
    noise = 2 * math.hypot(a["se_median_s"] / a["median_s"], b["se_median_s"] / b["median_s"])
    noise = max(noise, 0.01)
    if abs(math.log(ratio)) <= noise:
        return ratio, "same within noise"
    return ratio, "faster" if ratio > 1 else "slower"


class LocalGroup:
    """The RankGroup interface under torchrun: rank 0 of the launched ranks drives the others in-process. There is
    no parent here, so the cross-check of the stamps is against rank 0's own clock, and a hang is ended by the
    process group's timeout and torchrun, not by bench."""

    def __init__(self, rank):
        self.rank, self.used, self.info = rank, False, []

    def _take(self, kind, call=None):
        box, self.rank.outbox = self.rank.outbox, []
        for msg in box:
            if msg["type"] == "error":
                raise GroupFailed(msg["status"], f"rank {msg['rank']}: {msg['error']}", msg["rank"])
        for msg in box:
            if msg["type"] == kind and msg.get("call") == call:
                return msg
        raise GroupFailed("harness error", f"rank 0 sent no {kind} message")

    def start(self):
        ok = self.rank.start()
        self.info = [m for m in self.rank.outbox if m["type"] == "ready"]
        if not ok:
            self._take("ready")
        self.rank.outbox = []

    def call(self, workload, index, timeout):
        r = self.rank
        r.setup(r.command({"op": "setup", "workload": workload}))
        t_send = _clock()
        r.call(r.command({"op": "call", "call": index}))
        box = list(r.outbox)
        timed = self._take("timed", index)
        r.outbox = box
        return (t_send, timed["at_ns"]), timed["stamps"], self._take("result", index)

    def close(self, graceful=True):
        if self.rank is not None:
            self.rank.command({"op": "quit"})
            self.rank = None

    def log_tail(self, rank, n=15):
        return ""


class Runner:
    """Runs the plan: workloads by world, solutions interleaved call by call within a workload."""

    def __init__(self, args, solutions, geometry, cpu, console, local=None):
        self.args, self.solutions, self.geometry, self.cpu, self.console = args, solutions, geometry, cpu, console
        self.local = local
        self.groups = {}
        self.info = {}
        self.log_dir = tempfile.mkdtemp(prefix="wan-bench-")
        self.sampler = ClockSampler(0 if cpu else args.gpus)

    def group(self, sol, world):
        key = (sol["path"], world)
        if key not in self.groups:
            if self.local is not None:   # under torchrun: the one group this process belongs to, once
                if self.local.used:
                    raise GroupFailed("harness error", "the torchrun ranks failed on an earlier workload")
                self.local.used = True
                self.groups[key] = self.local
            else:
                self.groups[key] = RankGroup(sol["path"], world, self.geometry, self.cpu, self.log_dir)
            self.info.setdefault(sol["name"], self.groups[key].info)
        return self.groups[key]

    def drop(self, sol, world, graceful=False):
        g = self.groups.pop((sol["path"], world), None)
        if g is not None:
            g.close(graceful)

    def run_workload(self, workload, progress):
        """Every solution's calls at one workload; returns {solution name: record}."""
        world, timed = spec.WORKLOADS[workload]["world"], spec.WORKLOADS[workload]["timed"]
        clip = spec.WORKLOADS[workload]["clip"]
        allow = spec.allowance(clip, self.geometry)
        records, active = {}, []
        for sol in self.solutions:
            rec = {"workload": workload, "world": world, "clip": clip, "timed": timed, "status": None,
                   "passed": False, "reason": None, "allowance": allow, "calls": [], "samples_s": []}
            records[sol["name"]] = rec
            if sol.get("build_error"):
                rec.update(status="build error", reason=sol["build_error"])
                continue
            try:
                self.group(sol, world)
            except GroupFailed as e:
                self.fail(sol, world, rec, e)
                continue
            active.append(sol)
        warmups = self.args.warmup if timed else 0
        plan_min = warmups + (self.args.min_reps if timed else 1)
        spent = {s["name"]: 0.0 for s in active}
        task = progress.add_task(f"{workload}", total=plan_min * max(1, len(active)))
        index = 0
        while active:
            for sol in list(active):
                rec = records[sol["name"]]
                index += 1
                warm = len(rec["calls"]) < warmups
                self.sampler.start(world)
                try:
                    timeout = call_timeout(workload, self.geometry, self.cpu, self.args.timeout_scale,
                                           first=not rec["calls"])
                    window, stamps, msg = self.groups[(sol["path"], world)].call(workload, index, timeout)
                except GroupFailed as e:
                    self.sampler.stop()
                    self.fail(sol, world, rec, e)
                    active.remove(sol)
                    continue
                clocks = self.sampler.stop()
                call = self.judge(stamps, msg, window, allow)
                call.update(warmup=warm, clocks=clocks)
                rec["calls"].append(call)
                spent[sol["name"]] += call["time_s"] or 0
                progress.advance(task)
                if call["status"] != "passed":
                    rec.update(status=call["status"], reason=call["reason"])
                    active.remove(sol)
                    continue
                if not warm and timed:
                    rec["samples_s"].append(call["time_s"])
                if self.finished(rec, timed, warmups, spent[sol["name"]]):
                    rec.update(status="passed", passed=True)
                    active.remove(sol)
                    if self.args.profile:
                        self.profile_call(sol, world, workload, rec, allow, index + 1000)
        progress.remove_task(task)
        for rec in records.values():
            self.summarise(rec)
        return records

    def profile_call(self, sol, world, workload, rec, allow, index):
        """One more call (checked, not counted) under the profiler with the named scopes on."""
        os.makedirs(self.args.profile, exist_ok=True)
        prefix = os.path.abspath(os.path.join(self.args.profile, f"{sol['name']}-{workload}"))
        timeout = call_timeout(workload, self.geometry, self.cpu, self.args.timeout_scale) * 3
        try:
            window, stamps, msg = self.groups[(sol["path"], world)].call(workload, index, timeout, profile=prefix)
        except GroupFailed as e:
            self.fail(sol, world, rec, e)
            return
        call = self.judge(stamps, msg, window, allow)
        rec["profile"] = {"status": call["status"], "time_s": call["time_s"], "ranks": msg["profile"]}
        with open(prefix + "-scopes.json", "w") as f:
            json.dump(rec["profile"], f, indent=1)
        self.console.print(profile_report(sol["name"], workload, rec["profile"]))

    def finished(self, rec, timed, warmups, spent):
        if not timed:
            return len(rec["calls"]) >= 1
        n = len(rec["samples_s"])
        if n < self.args.min_reps:
            return False
        if n >= self.args.max_reps or spent >= self.args.time_cap:
            return True
        s = stats(rec["samples_s"])
        return s["se_median_s"] <= 0.005 * s["median_s"]

    def judge(self, stamps, msg, window, allow):
        call = timing_of(stamps, window)
        call["figures"] = msg["figures"]
        if msg["problems"]:
            call.update(status=msg["problems"][0][0], reason="; ".join(p[1] for p in msg["problems"]))
        elif call["status"] == "passed":
            call["status"], call["reason"] = verdict_of(msg["figures"], allow)
        return call

    def fail(self, sol, world, rec, e):
        tail = ""
        g = self.groups.get((sol["path"], world))
        if g is not None and e.rank is not None:
            tail = g.log_tail(e.rank)
        rec.update(status=e.status, reason=e.message, log_tail=tail or None)
        self.drop(sol, world)

    def summarise(self, rec):
        calls = rec["calls"]
        checked = [c["figures"] for c in calls if c.get("figures")]
        if checked:
            rec["max_abs"] = max(f["max_abs"] for f in checked)
            rec["rms"] = max(f["rms"] for f in checked)
            rec["psnr_db"] = min(f["psnr_db"] for f in checked)
        peaks = [c["peak_bytes"] for c in calls if c.get("peak_bytes")]
        if peaks and all(p is not None for p in peaks[0]):
            rec["peak_bytes"] = [max(p[r] for p in peaks) for r in range(len(peaks[0]))]
        rec["throttled_calls"] = sum(1 for c in calls if (c.get("clocks") or {}).get("throttled"))
        if rec["timed"] and rec["passed"] and rec["samples_s"]:
            s = stats(rec["samples_s"])
            rec.update(s)
            b = spec.bounds(rec["workload"], self.geometry)
            rec["tflops"] = b["flops"] / s["median_s"] / 1e12
            if not self.cpu and self.args.gpu_key:
                import bounds
                rec["bound_s"] = bounds.bound(rec["workload"], self.args.gpu_key, self.geometry)["bound_s"]
                rec["roofline"] = rec["bound_s"] / s["median_s"]
        else:
            rec.setdefault("median_s", None)

    def close(self):
        for key in list(self.groups):
            self.groups.pop(key).close(graceful=True)


def profile_report(name, workload, prof):
    """The per-scope table of a profiled call (rank 0's, with every rank's call share), as rich Table."""
    from rich.table import Table
    ranks = prof["ranks"]
    t = Table(title=f"{name} {workload}: time per scope (one profiled call of {prof['time_s']:.4f} s; traces: "
                    f"{', '.join(os.path.basename(r['trace']) for r in ranks)})")
    for col in ["scope"] + [f"rank {r['rank']} total s" for r in ranks] + ["rank 0 self s", "share of call"]:
        t.add_column(col, justify="left" if col == "scope" else "right")
    by_rank = [{row["scope"]: row for row in r["scopes"]} for r in ranks]
    names = {row["scope"] for row in ranks[0]["scopes"]}
    for row in ranks[0]["scopes"]:
        depth = row["scope"].count("/")
        parent = row["scope"].rsplit("/", 1)[0]
        t.add_row("  " * depth + row["scope"].split("/")[-1] if depth and parent in names else row["scope"],
                  *[f"{br.get(row['scope'], {}).get('total_s', 0):.4f}" for br in by_rank],
                  f"{row['self_s']:.4f}", f"{100 * row['total_s'] / ranks[0]['call_s']:.1f}%")
    for r in ranks:
        c = r.get("communication")
        if c:
            t.caption = (t.caption or "") + (f"rank {r['rank']}: communication {c['communication_s']:.4f} s, "
                                             f"{c['hidden_s']:.4f} s beside compute, {c['exposed_s']:.4f} s alone. ")
    return t


def objective(records):
    """Geometric mean of the timed workloads' medians; complete only when all nine passed and were timed."""
    times = [r["median_s"] for w, r in records.items() if spec.WORKLOADS[w]["timed"] and r.get("median_s")]
    complete = all(records.get(w, {}).get("median_s") for w in spec.TIMED_WORKLOADS)
    value = math.exp(sum(math.log(t) for t in times) / len(times)) if times else None
    return value, complete, len(times)


def environment(args, runner, solutions, geometry):
    env = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "host": platform.node(), "python": platform.python_version(), "geometry": geometry.name,
           "device": "cpu" if runner.cpu else "cuda", "visible_gpus": args.gpus}
    try:
        env["commit"] = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                       timeout=10).stdout.strip() or None
        # Tracked files that differ from that commit: the commit alone does not name what ran (the solutions'
        # content hashes do).
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                                capture_output=True, text=True, timeout=10).stdout
        env["changed_since_commit"] = [line[3:] for line in status.splitlines()] if env["commit"] else None
    except (OSError, subprocess.TimeoutExpired):
        env["commit"] = env["changed_since_commit"] = None
    manifest = os.path.join(spec.data_dir(geometry), spec.MANIFEST_FILE)
    if os.path.exists(manifest):
        with open(manifest, "rb") as f:
            env["data_manifest_sha256"] = hashlib.sha256(f.read()).hexdigest()
    if not runner.cpu:
        try:
            q = subprocess.run(["nvidia-smi", "--query-gpu=name,uuid,driver_version,power.limit,clocks.max.sm",
                                "--format=csv,noheader"], capture_output=True, text=True, timeout=20).stdout
            env["gpus"] = [dict(zip(("name", "uuid", "driver", "power_limit", "max_sm_clock"),
                                    [x.strip() for x in line.split(",")])) for line in q.strip().splitlines()]
        except (OSError, subprocess.TimeoutExpired):
            env["gpus"] = None
    env["ranks"] = runner.info
    env["solutions"] = {s["name"]: {"path": os.path.relpath(s["path"], ROOT) if s["path"].startswith(ROOT)
                                    else s["path"], "content_hash": s["hash"]} for s in solutions}
    return env


def build_in_child(path, timeout):
    """Build a solution's extension in a child process (a hanging compiler cannot hang the harness); returns None
    or the failure in a few lines: what failed and the compiler's first error."""
    code = (f"import sys, json; sys.path.insert(0, {ROOT!r}); import loader\n"
            f"try:\n    loader.build(loader.describe({path!r}))\n"
            f"except Exception as e:\n    print(json.dumps({{'error': str(e)}})); sys.exit(1)")
    try:
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return f"the build took more than {timeout:.0f} s"
    if not p.returncode:
        return None
    try:
        text = json.loads(p.stdout.strip().splitlines()[-1])["error"]
    except (ValueError, IndexError, KeyError):
        text = p.stderr.strip() or "build failed"
    lines = text.splitlines()
    first_error = next((ln.strip() for ln in lines if "error" in ln.lower() and ln is not lines[0]), "")
    return (lines[0][:500] + (f" ... {first_error[:500]}" if first_error else "")) if lines else "build failed"


def detect_gpus():
    """Visible CUDA GPUs, without starting CUDA in this process (NVML, else nvidia-smi)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) == "":
        return 0, None
    try:
        q = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                           text=True, timeout=20)
        names = [x.strip() for x in q.stdout.strip().splitlines() if x.strip()]
    except (OSError, subprocess.TimeoutExpired):
        return 0, None
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        names = [names[int(i)] for i in visible.split(",") if i.strip().isdigit() and int(i) < len(names)]
    return len(names), (names[0] if names else None)


def parse_args(argv):
    p = argparse.ArgumentParser(description="Check and time solutions on the task's workloads.",
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("solutions", nargs="+", help="solution directories or .py files")
    p.add_argument("--workloads", help="comma list of workloads (default: all fifteen)")
    p.add_argument("--worlds", help="comma list of world sizes to keep (1, 2, 4)")
    p.add_argument("--tiny", action="store_true", help="the tiny geometry on the CPU (gloo), for any machine")
    p.add_argument("--json", help="write every figure, sample and status here")
    p.add_argument("--warmup", type=int, default=1, help="warm-up calls per timed workload (checked, not timed)")
    p.add_argument("--min-reps", type=int, default=3, help="timed calls at least")
    p.add_argument("--max-reps", type=int, default=20, help="timed calls at most")
    p.add_argument("--time-cap", type=float, default=60.0, help="seconds of timed calls per workload and solution")
    p.add_argument("--timeout-scale", type=float, default=1.0, help="scale the per-call timeouts")
    p.add_argument("--no-make", action="store_true", help="fail instead of making missing data")
    p.add_argument("--profile", metavar="DIR", help="after a workload's calls, profile one more call per rank with "
                                                     "the named scopes on: Chrome traces and a per-scope table in DIR")
    return p.parse_args(argv)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        return worker_main(argv)
    if argv[:1] == ["--scopes"]:
        return scopes_main(argv[1:])
    args = parse_args(argv)
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
    # Launched by torchrun (or a scheduler with its env:// variables): every rank runs this; rank 0 drives.
    torchrun = "RANK" in os.environ and "WAN_BENCH_RESULT_FD" not in os.environ
    rank0 = not torchrun or os.environ["RANK"] == "0"
    console = Console(width=None if sys.stdout.isatty() else 160, quiet=not rank0)
    gpus, gpu_name = (0, None) if args.tiny else detect_gpus()
    cpu = args.tiny or gpus == 0
    if cpu and not args.tiny:
        console.print("[yellow]No CUDA GPU is visible: running the TINY geometry on the CPU (gloo). Its times say "
                      "nothing about a GPU; pass --tiny to choose this explicitly.[/]")
    geometry = spec.TINY if cpu else spec.FULL
    args.gpus = gpus
    import bounds
    args.gpu_key = bounds.gpu_key(gpu_name)
    workloads = list(spec.WORKLOADS) if not args.workloads else [w.strip() for w in args.workloads.split(",")]
    unknown = [w for w in workloads if w not in spec.WORKLOADS]
    if unknown:
        console.print(f"[red]unknown workloads {unknown}; the workloads are {', '.join(spec.WORKLOADS)}[/]")
        return 2
    if args.worlds:
        keep = {int(x) for x in args.worlds.split(",")}
        workloads = [w for w in workloads if spec.WORKLOADS[w]["world"] in keep]
    if torchrun:
        if len(args.solutions) != 1:
            console.print("[red]under torchrun, bench takes one solution[/]")
            return 2
        world = int(os.environ["WORLD_SIZE"])
        skipped = [w for w in workloads if spec.WORKLOADS[w]["world"] != world]
        for w in skipped:
            console.print(f"[yellow]skip {w}: torchrun started {world} ranks, it needs {spec.WORKLOADS[w]['world']}[/]")
    else:
        skipped = [w for w in workloads if not cpu and spec.WORKLOADS[w]["world"] > gpus]
        for w in skipped:
            console.print(f"[yellow]skip {w}: it needs {spec.WORKLOADS[w]['world']} GPUs, {gpus} visible[/]")
    workloads = [w for w in workloads if w not in skipped]

    import loader
    solutions = []
    for path in args.solutions:
        try:
            d = loader.describe(path)
        except loader.SolutionError as e:
            console.print(f"[red]{e}[/]")
            return 2
        sol = {"name": d.name, "path": d.path, "hash": d.content_hash, "build_error": None}
        if d.manifest.get("sources") and rank0:
            console.print(f"building {d.name} ...")
            sol["build_error"] = build_in_child(d.path, timeout=1200)
            if sol["build_error"]:
                console.print(f"[red]{d.name}: build error: {sol['build_error']}[/]")
        if sol["name"] in {s["name"] for s in solutions}:
            sol["name"] = f"{sol['name']}#{len(solutions)}"
        solutions.append(sol)

    local = None
    if torchrun:
        worker = _Rank(argparse.Namespace(solution=solutions[0]["path"], geometry=geometry.name,
                                          device="cpu" if cpu else "cuda"))
    clips = sorted({spec.WORKLOADS[w]["clip"] for w in workloads}, key=list(spec.CLIPS).index)
    if clips and rank0:
        try:
            if args.no_make:
                for c in clips:
                    spec.load_reference(c, geometry), spec.calibration(c, geometry)
            else:
                import data.make
                data.make.ensure(clips, geometry)
        except ValueError as e:
            console.print(f"[red]data: {e}[/]")
            return 2

    if torchrun:
        worker.dist.barrier(group=worker.hg)   # the data and the build are there for every rank
        if not rank0:
            worker.serve()
            worker.dist.destroy_process_group()
            return 0
        local = LocalGroup(worker)
        local.start()
    label = f"{geometry.name} geometry on the {'CPU (gloo)' if cpu else f'GPU ({gpus} x {gpu_name})'}"
    console.print(f"[bold]bench[/] {', '.join(s['name'] for s in solutions)}: {len(workloads)} workloads, {label}")
    runner = Runner(args, solutions, geometry, cpu, console, local)
    results = {s["name"]: {} for s in solutions}
    order = sorted(workloads, key=lambda w: (spec.WORKLOADS[w]["world"], list(spec.WORKLOADS).index(w)))
    try:
        with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total} calls"),
                      TimeElapsedColumn(), console=console, transient=True) as progress:
            overall = progress.add_task("workloads", total=len(order))
            for w in order:
                for name, rec in runner.run_workload(w, progress).items():
                    results[name][w] = rec
                    console.print(_line(name, rec, len(solutions) > 1))
                progress.advance(overall)
                # Groups are per world: close them once the last workload of their world is done.
                nxt = order[order.index(w) + 1] if order.index(w) + 1 < len(order) else None
                if nxt is None or spec.WORKLOADS[nxt]["world"] != spec.WORKLOADS[w]["world"]:
                    runner.close()
    finally:
        runner.close()

    for w in skipped:
        for s in solutions:
            results[s["name"]][w] = {"workload": w, "world": spec.WORKLOADS[w]["world"], "timed": spec.WORKLOADS[w]["timed"],
                                     "status": "skipped", "passed": False, "median_s": None,
                                     "reason": f"needs {spec.WORKLOADS[w]['world']} GPUs, {gpus} visible"}
    report = _report(console, solutions, results, geometry, cpu)
    report["environment"] = environment(args, runner, solutions, geometry)
    report["statuses"] = STATUSES
    report["method"] = {"warmup": args.warmup, "min_reps": args.min_reps, "max_reps": args.max_reps,
                        "time_cap_s": args.time_cap, "stop": "se(median) <= 0.5% of the median"}
    if args.json:
        tmp = args.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump(report, f, indent=1, default=str)
        os.replace(tmp, args.json)
        console.print(f"wrote {args.json}")
    if torchrun:
        worker.dist.destroy_process_group()
    ok = all(r["status"] in ("passed", "skipped") for res in results.values() for r in res.values())
    return 0 if ok else 1


def _gib(b):
    return f"{b / 2**30:.1f}"


def _line(name, rec, many):
    who = f"{name} " if many else ""
    if rec["status"] != "passed":
        return f"  {who}{rec['workload']:<8} [red]{rec['status']}[/]: {rec['reason']}"
    t = f"median {rec['median_s']:.4f} s (n={rec['n']}, spread {100 * rec['spread']:.1f}%)" if rec.get("median_s") \
        else "checked"
    return f"  {who}{rec['workload']:<8} [green]passed[/] PSNR {rec['psnr_db']:.1f} dB, {t}"


def _report(console, solutions, results, geometry, cpu):
    from rich.table import Table
    out = {"geometry": geometry.name, "device": "cpu" if cpu else "cuda"}
    per = {}
    for s in solutions:
        res = results[s["name"]]
        table = Table(title=f"{s['name']} ({geometry.name} geometry{', CPU' if cpu else ''})")
        for col in ("workload", "world", "status", "max|d| / allow", "rms / allow", "PSNR dB", "median s",
                    "spread", "n", "TFLOP/s", "roofline", "peak GiB"):
            table.add_column(col, justify="left" if col in ("workload", "status") else "right")
        for w in spec.WORKLOADS:
            r = res.get(w)
            if r is None:
                continue
            a = r.get("allowance") or {}
            table.add_row(
                w, str(r["world"]), r["status"],
                f"{r['max_abs']:.3g} / {a['max_abs']:.3g}" if "max_abs" in r else "",
                f"{r['rms']:.3g} / {a['rms']:.3g}" if "rms" in r else "",
                f"{r['psnr_db']:.1f}" if "psnr_db" in r else "",
                f"{r['median_s']:.4f}" if r.get("median_s") else "",
                f"{100 * r['spread']:.1f}%" if r.get("median_s") else "",
                str(r.get("n", "")) if r.get("median_s") else "",
                f"{r['tflops']:.3g}" if r.get("tflops") else "",
                f"{100 * r['roofline']:.1f}%" if r.get("roofline") else "",
                _gib(max(r["peak_bytes"])) if r.get("peak_bytes") else "")
        console.print(table)
        value, complete, n = objective(res)
        if value is not None:
            console.print(f"objective ({s['name']}): geomean of {n} timed medians = [bold]{value:.4f} s[/]"
                          + ("" if complete else " [yellow](partial: not all nine timed workloads passed)[/]"))
        else:
            console.print(f"objective ({s['name']}): none (no timed workload passed)")
        per[s["name"]] = {"workloads": res, "objective_s": value, "objective_complete": complete,
                          "objective_workloads": n, "content_hash": s["hash"]}
    if len(solutions) > 1:
        base = solutions[0]["name"]
        lines = []
        for s in solutions[1:]:
            for w in spec.WORKLOADS:
                a, b = results[base].get(w), results[s["name"]].get(w)
                if a and b and a.get("median_s") and b.get("median_s"):
                    ratio, v = verdict(a, b)
                    lines.append({"workload": w, "solution": s["name"], "baseline": base, "time_ratio": ratio,
                                  "verdict": f"{base} {v}"})
                    console.print(f"  {w:<8} {s['name']} takes {ratio:.2f}x the time of {base}: {base} {v}")
        out["comparisons"] = lines
        out["solutions"] = per
    else:
        out.update(per[solutions[0]["name"]])
    return out


if __name__ == "__main__":
    sys.exit(main())
