"""The gate: `python ci.py SOLUTION [--tiny] [--json PATH] [--junit PATH]`; exit 0 only when the audit is clean and
every check passes.

Exit codes: 0 passed, 1 wrong results (incorrect, input modified, tampering, impossibly fast), 2 runtime failure
(exception, crash, timeout, build or load error), 3 audit failure, 4 harness error. With several kinds of failure
the code is the first of harness, audit, runtime, wrong.

What it checks, beyond bench.py's per-call checks (NaN-poisoned out, out's storage, z and weights unchanged, no
threads or processes left running, no harness function replaced):
- audit.py's static rules over every source.
- The stored workloads (all fifteen by default), one call each, checked here in the gate's process against the
  stored fp32 references. The ranks run with a private data folder holding only the weights and decoy reference
  files (wrong videos whose access time gives a reader away); the latents come from the gate per call and `out`
  comes back to the gate, so no rank process ever holds a real reference.
- Fresh latents that exist nowhere on disk (a secret seed, the data maker's latent statistics), a new draw for
  every call: the gate computes their fp32 decode and the release bf16 decode itself, and the allowance from
  them, so stored answers and caches are useless.
- Every call's time against the roofline (bounds.bound): faster than the hardware allows is impossible.
"""
import argparse
import json
import math
import os
import secrets
import shutil
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

import spec

ROOT = os.path.dirname(os.path.abspath(__file__))
EXIT = {"passed": 0, "wrong": 1, "runtime": 2, "audit": 3, "harness": 4}
KIND = {"passed": "passed", "incorrect": "wrong", "input modified": "wrong", "tampering": "wrong",
        "impossible": "wrong", "invalid timing": "wrong", "runtime error": "runtime", "crash": "runtime",
        "timeout": "runtime", "build error": "runtime", "load error": "runtime", "audit": "audit",
        "harness error": "harness"}
# The tiny geometry's "hardware limit" on a CPU. Its decode is overhead-bound (about 0.01 TFLOP/s on a 2-core
# machine), so 0.5 is above any CPU's, and the floor it sets on f5 (1.2 ms) stays above a replayed result's call
# time (a copy and the window's own overhead) even on a loaded machine: at 5.0 a replay once took longer than that.
CPU_PEAK = {"bf16_tflops": 0.5, "hbm_tbps": 1.0}
FRESH_LATENT_FRAMES = 2                              # the fresh clips: f5's shape (first chunk + one more)


class Gate:
    def __init__(self, args, console):
        import bench
        self.args, self.console, self.bench = args, console, bench
        self.checks = []
        gpus, name = (0, None) if args.tiny else bench.detect_gpus()
        self.cpu = args.tiny or gpus == 0
        self.gpus, self.gpu_name = gpus, name
        self.geometry = spec.TINY if self.cpu else spec.FULL
        import bounds
        key = bounds.gpu_key(name)
        # An unknown GPU gets the fastest datasheet of the table: "impossible" must never fail an honest solution.
        self.peaks = CPU_PEAK if self.cpu else bounds.GPUS[key] if key else max(bounds.GPUS.values(),
                                                                                 key=lambda p: p["bf16_tflops"])
        self.private = tempfile.mkdtemp(prefix="wan-ci-")
        self.seed = args.seed if args.seed is not None else secrets.randbits(62)

    def add(self, name, status, reason=None, seconds=None, **extra):
        self.checks.append({"name": name, "status": status, "reason": reason, "seconds": seconds, **extra})
        colour = "green" if status == "passed" else "red"
        self.console.print(f"[{colour}]{'PASS' if status == 'passed' else 'FAIL'}[/] {name}"
                           + (f": {status}: {reason}" if status != "passed" else "")
                           + (f" ({seconds:.3f} s)" if seconds is not None else ""))

    # -- the audit
    def audit(self):
        import audit
        report = audit.audit(self.args.solution)
        if report.ok:
            self.add("audit", "passed", allowed=[str(a) for a in report.allowed])
        else:
            lines = [f"{f.file}:{f.line}: {f.rule}: {f.reason}" for f in report.findings]
            self.add("audit", "audit", f"{len(lines)} finding(s): " + "; ".join(lines[:12]), findings=lines)

    # -- the ranks' private data folder
    def stage(self):
        """Weights (linked), weight names, and decoys: reference files of the right format holding wrong videos,
        their access time set before their modification time so that a read moves it (relatime)."""
        import torch
        src, dst = spec.data_dir(self.geometry), os.path.join(self.private, "data")
        dst_geo = dst if self.geometry.name == "full" else os.path.join(dst, self.geometry.name)
        os.makedirs(dst_geo)
        for name in (spec.WEIGHTS_FILE, spec.NAMES_FILE):
            os.symlink(os.path.join(src, name), os.path.join(dst_geo, name))
        self.decoys = {}
        for clip in spec.CLIPS:
            path = os.path.join(dst_geo, f"ref_{clip}.pt")
            shape = (1, 3, 1, *self.geometry.video_hw)   # one frame: a decoy need not be big
            torch.save({"video": torch.zeros(shape, dtype=torch.float16), "source": spec.CLIPS[clip]["source"],
                        "latent_frames": spec.CLIPS[clip]["latent_frames"]}, path)
            st = os.stat(path)
            os.utime(path, ns=(st.st_mtime_ns - 3_600_000_000_000, st.st_mtime_ns))
            self.decoys[path] = os.stat(path).st_atime_ns
        # Whether this filesystem moves access times at all (noatime mounts don't): test on a control file.
        control = os.path.join(self.private, "control")
        with open(control, "wb") as f:
            f.write(b"x")
        st = os.stat(control)
        os.utime(control, ns=(st.st_mtime_ns - 3_600_000_000_000, st.st_mtime_ns))
        before = os.stat(control).st_atime_ns
        with open(control, "rb") as f:
            f.read()
        self.atime_works = os.stat(control).st_atime_ns != before
        return dst

    def decoys_read(self):
        return [os.path.basename(p) for p, t in self.decoys.items() if os.stat(p).st_atime_ns != t]

    # -- fresh latents and their references, computed here
    def fresh_cases(self, n):
        """n fresh latents [1, C, 2, h, w] with their fp32 references (fp16) and allowances."""
        import torch
        import reference
        from data import synth
        device = "cpu" if self.cpu else "cuda"
        weights = spec.load_weights(device, self.geometry)
        cases = []
        for i in range(n):
            z = synth.latents(self.geometry, self.seed, f"ci/{i}", frames=FRESH_LATENT_FRAMES)
            ref = reference.decode_fp32(z.to(device), weights).to(torch.float16)
            bf16 = reference.decode_bf16(z.to(device), weights)
            d = bf16.float() - ref.float()
            allow = spec.allowance_from(float(d.abs().max()), float(d.square().mean().sqrt()))
            cases.append({"z": z.to(torch.bfloat16), "ref": ref.cpu(), "allow": allow})
        del weights
        return cases

    # -- one call through bench's rank processes, checked here
    def call(self, group, name, workload, z, ref, allow, index):
        import torch
        z_path = os.path.join(self.private, f"z{index}.pt")
        dump = os.path.join(self.private, f"out{index}.pt")
        torch.save(z.contiguous(), z_path)
        world = spec.WORKLOADS[workload]["world"]
        timeout = self.bench.call_timeout(workload, self.geometry, self.cpu, self.args.timeout_scale,
                                          first=index == self.first_index.get(world))
        try:
            window, stamps, msg = group.call(workload, index, timeout, z_path=z_path, dump_path=dump)
        finally:
            os.remove(z_path)
        call = self.bench.timing_of(stamps, window)
        if msg["problems"]:
            call.update(status=msg["problems"][0][0], reason="; ".join(p[1] for p in msg["problems"]))
        out = torch.load(dump, weights_only=True)
        os.remove(dump)
        if call["status"] == "passed":
            figures = self.bench.compare(out, ref, "cpu" if self.cpu else "cuda")
            call["figures"] = figures
            call["status"], call["reason"] = self.bench.verdict_of(figures, allow)
        import bounds
        b = bounds.bound_of(z.shape[2], world, self.peaks, self.geometry)
        floor = b["bound_s"]
        if call["time_s"] < floor:
            why = (f"{call['time_s'] * 1e3:.3f} ms is below the roofline bound {floor * 1e3:.3f} ms "
                   f"({b['flops_per_gpu'] / 1e12:.3g} TFLOP per GPU at {self.peaks['bf16_tflops']:.0f} TFLOP/s)")
            if call["status"] == "passed":
                call.update(status="impossible", reason=why)
            else:
                call["reason"] += f"; {why}"
        self.add(name, call["status"], call["reason"], call["time_s"], workload=workload, figures=call.get("figures"))

    def run(self):
        import torch
        import bench
        args = self.args
        self.audit()
        workloads = list(spec.WORKLOADS) if not args.workloads else args.workloads.split(",")
        workloads = [w for w in workloads if self.cpu or spec.WORKLOADS[w]["world"] <= self.gpus]
        # f1 too: the fresh latents need the weights even when no stored workload is left to run
        clips = sorted({spec.WORKLOADS[w]["clip"] for w in workloads} | {"f1"}, key=list(spec.CLIPS).index)
        import data.make
        data.make.ensure(clips, self.geometry)
        import loader
        desc = loader.describe(args.solution)
        if desc.manifest.get("sources"):
            err = bench.build_in_child(desc.path, timeout=1200)
            if err:
                self.add("build", "build error", err)
                return
        staged = self.stage()
        worlds = sorted({spec.WORKLOADS[w]["world"] for w in workloads} | {1})
        fresh = self.fresh_cases(args.fresh_calls * len(worlds))
        index = 0
        self.first_index = {}
        for world in worlds:
            group = None
            try:
                group = bench.RankGroup(desc.path, world, self.geometry, self.cpu, self.private,
                                        env={"DATA": staged})
            except bench.GroupFailed as e:
                self.add(f"start x{world}", e.status, e.message)
                continue
            self.first_index[world] = index + 1
            todo = [(f"fresh latents #{k + 1} x{world}", f"f5x{world}" if world in (1, 4) else f"f121x{world}",
                     fresh.pop()) for k in range(args.fresh_calls)]
            todo += [(w, w, None) for w in workloads if spec.WORKLOADS[w]["world"] == world]
            for name, workload, case in todo:
                index += 1
                if case is None:
                    clip = spec.WORKLOADS[workload]["clip"]
                    t = spec.CLIPS[clip]["latent_frames"]
                    z = spec.load_latents(spec.CLIPS[clip]["source"], self.geometry, t)[:, :, :t]
                    case = {"z": z.to(torch.bfloat16), "ref": spec.load_reference(clip, self.geometry),
                            "allow": spec.allowance(clip, self.geometry)}
                try:
                    self.call(group, name, workload, case["z"], case["ref"], case["allow"], index)
                except bench.GroupFailed as e:
                    self.add(name, e.status, e.message + (f"\n{group.log_tail(e.rank)}" if e.rank is not None
                                                          else ""))
                    group.close(graceful=False)
                    group = None
                    if e.status == "timeout":   # a hang repeats; each costs the whole timeout
                        self.add(f"rest of x{world}", "timeout", "not run: a call at this world hung")
                        break
                    try:
                        group = bench.RankGroup(desc.path, world, self.geometry, self.cpu, self.private,
                                        env={"DATA": staged})
                        self.first_index[world] = index + 1
                    except bench.GroupFailed as e2:
                        self.add(f"restart x{world}", e2.status, e2.message)
                        break
            if group is not None:
                group.close(graceful=True)
        read = self.decoys_read()
        if read:
            self.add("stored references", "tampering", f"a solution process read the decoy references {read}")
        elif self.atime_works:
            self.add("stored references", "passed")
        else:
            self.console.print("[yellow]note: this filesystem does not update access times (noatime): reads of the "
                               "decoy references cannot be detected here[/]")

    def close(self):
        shutil.rmtree(self.private, ignore_errors=True)


def exit_code(checks):
    kinds = {KIND.get(c["status"], "harness") for c in checks}
    for kind in ("harness", "audit", "runtime", "wrong"):
        if kind in kinds:
            return EXIT[kind]
    return EXIT["passed"]


def junit(checks, path, suite):
    root = ET.Element("testsuite", name=suite, tests=str(len(checks)),
                      failures=str(sum(c["status"] != "passed" for c in checks)))
    for c in checks:
        case = ET.SubElement(root, "testcase", classname=suite, name=c["name"], time=f"{c.get('seconds') or 0:.6f}")
        if c["status"] != "passed":
            ET.SubElement(case, "failure", type=c["status"], message=(c["reason"] or "")[:2000])
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def main(argv=None):
    p = argparse.ArgumentParser(description="The gate: audit, every workload, fresh latents, the roofline floor.")
    p.add_argument("solution")
    p.add_argument("--tiny", action="store_true", help="the tiny geometry on the CPU (gloo)")
    p.add_argument("--workloads", help="comma list (default: all fifteen)")
    p.add_argument("--fresh-calls", type=int, default=2, help="calls with fresh latents per world")
    p.add_argument("--seed", type=int, help="the fresh latents' seed (default: a secret one)")
    p.add_argument("--timeout-scale", type=float, default=1.0)
    p.add_argument("--json", help="write every check here")
    p.add_argument("--junit", help="write JUnit XML here")
    args = p.parse_args(argv)
    from rich.console import Console
    console = Console(width=None if sys.stdout.isatty() else 160, highlight=False)
    started = time.monotonic()
    gate = None
    try:
        gate = Gate(args, console)
        gate.run()
    except Exception as e:  # the harness's own failure: never reported as the solution's
        import traceback
        traceback.print_exc()
        checks = (gate.checks if gate else []) + [{"name": "harness", "status": "harness error",
                                                   "reason": f"{type(e).__name__}: {e}", "seconds": None}]
    else:
        checks = gate.checks
    finally:
        if gate is not None:
            gate.close()
    code = exit_code(checks)
    failed = [c for c in checks if c["status"] != "passed"]
    verdict = "PASSED" if code == 0 else f"FAILED ({len(failed)} of {len(checks)} checks)"
    console.print(f"[bold]ci {os.path.basename(os.path.abspath(args.solution))}: {verdict}[/], exit {code}, "
                  f"{time.monotonic() - started:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"solution": args.solution, "exit_code": code, "passed": code == 0, "checks": checks,
                       "geometry": gate.geometry.name if gate else None}, f, indent=1, default=str)
    if args.junit:
        junit(checks, args.junit, "ci")
    return code


if __name__ == "__main__":
    sys.exit(main())
