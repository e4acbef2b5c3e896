"""The gate's plan (ci.py): the audit, then every workload and fresh latents through the same rank processes and
judge as bench, each call checked in this process, and the roofline floor.

Fresh latents exist nowhere on disk: a secret seed, the data maker's latent statistics, a new draw for every call;
the gate computes their fp32 decode and the release bf16 decode itself, and the allowance from them."""
import secrets

import spec
from harness import checks
from harness.group import Group, GroupFailed
from harness.runner import call_timeout, judged
from harness.session import Run

# The tiny geometry's "hardware limit" on a CPU. Its decode is overhead-bound (about 0.01 TFLOP/s on a 2-core
# machine), so 0.5 is above any CPU's, and the floor it sets on f5 (1.2 ms) stays above a replayed result's call
# time (a copy and the window's own overhead) even on a loaded machine.
CPU_PEAK = {"bf16_tflops": 0.5, "hbm_tbps": 1.0}
FRESH_LATENT_FRAMES = 2                              # the fresh clips: f5's shape (first chunk + one more)


class Gate:
    def __init__(self, args, console, add):
        from harness import hardware
        import bounds
        self.args, self.console, self.add = args, console, add
        gpus, name = (0, None) if args.tiny else hardware.detect_gpus()
        self.cpu = args.tiny or gpus == 0
        self.gpus = gpus
        self.geometry = spec.TINY if self.cpu else spec.FULL
        key = hardware.gpu_key(name)
        # An unknown GPU gets the fastest datasheet of the table: "impossible" must never fail an honest solution.
        self.peaks = CPU_PEAK if self.cpu else bounds.GPUS[key] if key else max(bounds.GPUS.values(),
                                                                                 key=lambda p: p["bf16_tflops"])
        self.seed = args.seed if args.seed is not None else secrets.randbits(62)
        self.device = "cpu" if self.cpu else "cuda:0"
        self.run_ = None

    def audit(self):
        import audit
        if self.args.no_audit:
            self.add("audit", "skipped", "--no-audit")
            return
        report = audit.audit(self.args.solution)
        if report.ok:
            self.add("audit", "passed", allowed=[str(a) for a in report.allowed])
        else:
            lines = [f"{f.file}:{f.line}: {f.rule}: {f.reason}" for f in report.findings]
            self.add("audit", "audit", f"{len(lines)} finding(s): " + "; ".join(lines[:12]), findings=lines)

    def fresh_cases(self, n):
        """n fresh latents [1, C, 2, h, w] with their fp32 references (fp16) and allowances."""
        import torch
        import reference
        from data import synth
        weights = spec.load_weights(self.device, self.geometry)
        cases = []
        for i in range(n):
            z = synth.latents(self.geometry, self.seed, f"ci/{i}", frames=FRESH_LATENT_FRAMES).to(torch.bfloat16)
            ref = reference.decode_fp32(z.to(self.device), weights).to(torch.float16)
            bf16 = reference.decode_bf16(z.to(self.device), weights)
            d = bf16.float() - ref.float()
            allow = spec.allowance_from(float(d.abs().max()), float(d.square().mean().sqrt()))
            cases.append({"z": z, "ref": ref.cpu(), "allow": allow})
        del weights
        return cases

    def stored_case(self, workload):
        import torch
        clip = spec.WORKLOADS[workload]["clip"]
        t = spec.CLIPS[clip]["latent_frames"]
        z = spec.load_latents(spec.CLIPS[clip]["source"], self.geometry, t)[:, :, :t]
        return {"z": z.to(torch.bfloat16).contiguous(), "ref": spec.load_reference(clip, self.geometry),
                "allow": spec.allowance(clip, self.geometry)}

    def call(self, group, name, workload, case, first):
        import bounds
        world = spec.WORKLOADS[workload]["world"]
        t = case["z"].shape[2]
        timeout = call_timeout(t, world, self.geometry, self.cpu, self.args.timeout_scale, first=first)
        call = judged(group, case["z"], case["ref"], case["allow"], timeout, self.device)
        b = bounds.bound_of(t, world, self.peaks, self.geometry)
        if call["time_s"] < b["bound_s"]:
            why = (f"{call['time_s'] * 1e3:.3f} ms is below the roofline bound {b['bound_s'] * 1e3:.3f} ms "
                   f"({b['flops_per_gpu'] / 1e12:.3g} TFLOP per GPU at {self.peaks['bf16_tflops']:.0f} TFLOP/s)")
            call["status"], call["reason"] = checks.worst([(call["status"], call["reason"]), ("impossible", why)]
                                                          if call["status"] != "passed" else [("impossible", why)])
        self.add(name, call["status"], call["reason"], call["time_s"], workload=workload, figures=call["figures"])

    def run(self, workloads):
        """Run the plan on `workloads` (those this machine can run)."""
        import data.make
        import loader
        args = self.args
        self.audit()
        # f1 too: the fresh latents need the weights even when no stored workload is left to run
        clips = sorted({spec.WORKLOADS[w]["clip"] for w in workloads} | {"f1"}, key=list(spec.CLIPS).index)
        data.make.ensure(clips, self.geometry)
        desc = loader.describe(args.solution)
        if desc.manifest.get("sources"):
            err = loader.build_in_child(desc.path, timeout=1200)
            if err:
                self.add("build", "build error", err)
                return
        run = self.run_ = Run(self.geometry, self.cpu, isolation=not args.no_isolation)
        if run.lock is None and not args.no_isolation:
            self.add("isolation", "no isolation", "this platform offers no sandbox for the ranks (Landlock); "
                                                  "pass --no-isolation to check without one (not a certificate)")
            return
        worlds = sorted({spec.WORKLOADS[w]["world"] for w in workloads} | {1})
        frames = {FRESH_LATENT_FRAMES} | {spec.CLIPS[spec.WORKLOADS[w]["clip"]]["latent_frames"] for w in workloads}
        run.buffers_for(max(worlds), max(frames))
        fresh = self.fresh_cases(args.fresh_calls * len(worlds))
        for world in worlds:
            todo = [(f"fresh latents #{k + 1} x{world}", f"f5x{world}" if world in (1, 4) else f"f121x{world}",
                     fresh.pop()) for k in range(args.fresh_calls)]
            todo += [(w, w, None) for w in workloads if spec.WORKLOADS[w]["world"] == world]
            self.world(desc, world, frames, todo)

    def world(self, desc, world, frames, todo):
        group, first = None, True
        for name, workload, case in todo:
            if group is None:
                try:
                    group, first = Group(desc, world, self.geometry, self.cpu, self.run_.buffers, self.run_, frames,
                                         self.run_.lock), True
                except GroupFailed as e:
                    self.add(f"start x{world}", e.status, e.message)
                    return
            try:
                self.call(group, name, workload, case or self.stored_case(workload), first)
                first = False
            except GroupFailed as e:
                self.add(name, e.status, e.message + (f"\n{group.log_tail(e.rank)}" if e.rank is not None else ""))
                group.close(graceful=False)
                group = None
                if e.status == "timeout":   # a hang repeats; each costs the whole timeout
                    self.add(f"rest of x{world}", "timeout", "not run: a call at this world hung")
                    return
        if group is not None:
            group.close(graceful=True)

    def close(self):
        if self.run_ is not None:
            self.run_.close()
