"""bench's plan: workloads by world, solutions interleaved call by call within a workload, each call judged here
(which latents each call gets: BenchPlan.run_workload).

Timed calls repeat until the standard error of the median is under 0.5% of it (about a 1% half-width at 95%)
after at least --min-reps, or until --time-cap seconds of calls, or --max-reps; warm-up calls (checked like the rest)
come first. The working set (GBs) is far beyond L2, so no cache flush between calls."""
import contextlib
import json
import os
import secrets

import bounds
import spec
from harness.isolation import disk
from harness.judge import checks
from harness.judge.breakdown import NONE, Breakdown
from harness.judge.fresh import Fresh
from harness.judge.group import STARTUP_S, Group, GroupFailed
from harness.report import error_maps, profile

REPEATS = 2                  # calls on the stored latents again after the timed ones
LOOKS = 2                    # more fresh calls where parity has no bar or finds the seen calls too fast
# How much faster one kind of call may run than the other (more where the calls' own spread is more): a replay or
# skipped work gains far more; a loaded CPU's noise alone can reach tens of per cent.
PARITY_TOLERANCE, PARITY_TOLERANCE_CPU = 0.10, 1.0


def call_timeout(latent_frames, world, geometry, cpu, scale=1.0, first=False):
    """Seconds a call may take before it is a timeout: generous, from the decode's FLOPs at a slow rate (the first
    call of a process also gets the time for autotuning and compiling)."""
    flops = spec.decode_flops(latent_frames, geometry) / world
    rate = 2e9 if cpu else 20e12   # fp32-ish worst cases: a 2-core CPU, an unoptimised GPU decode
    return scale * (60.0 + flops / rate + (STARTUP_S if first else 0.0))


def parity(rec, cpu):
    """{}, a failure, or None where no warm fresh call exists to judge by: the fastest call on the stored latents
    (the timed one, which another process of the solution could have seen, and the repeats, which this one had)
    against the fastest warm timed call on fresh latents, beyond noise (a cache that keeps only the last latents hits
    the second of the back-to-back repeats). A workload's first call is never the bar: it may compile or autotune."""
    timed = [c for c in rec["calls"] if not c.get("warmup") and c.get("time_s") is not None]
    fresh = [c["time_s"] for c in timed if c.get("inputs") == "fresh" and c is not rec["calls"][0]]
    if not fresh:
        return None
    seen = rec["repeat_s"] + [c["time_s"] for c in timed if c.get("inputs") == "stored"]
    why = too_fast(seen, fresh, cpu, noise(fresh))
    return {"status": "tampering", "passed": False, "reason": why} if why else {}


def noise(times):
    """The spread of the faster half of `times` (over its fastest): a solution that slows some of its calls widens
    the whole spread at will, not this one, unless it slows most of them."""
    s = sorted(times)
    low = s[:max(2, (len(s) + 1) // 2)]
    return (low[-1] - low[0]) / low[0] if len(low) > 1 and low[0] > 0 else 0.0


def too_fast(seen, fresh, cpu, spread=0.0):
    """The reason when the fastest call on latents a solution had or could have seen beats the fastest on latents
    it never saw by more than noise (PARITY_TOLERANCE, or twice `spread` up to twice PARITY_TOLERANCE: slowing most
    of its fresh calls buys a solution no more than that); else None."""
    base = PARITY_TOLERANCE_CPU if cpu else PARITY_TOLERANCE
    tol = min(max(base, 2 * spread), 2 * base)
    if seen and fresh and min(seen) * (1 + tol) < min(fresh):
        return (f"faster on repeated inputs: {min(seen):.4g} s on latents it had or could have seen, at least "
                f"{min(fresh):.4g} s on latents it never saw (more than {100 * tol:.0f}% apart)")
    return None


def floored(call, latent_frames, world, peaks, geometry):
    """`call` failed as impossible where its time is under the roofline's floor (bounds.impossible), a worse verdict
    kept."""
    why = bounds.impossible(call["time_s"], latent_frames, world, peaks, geometry)
    if why:
        earlier = [] if call["status"] == "passed" else [(call["status"], call["reason"])]
        call["status"], call["reason"] = checks.worst(earlier + [("impossible", why)])
    return call


def judged(group, z, ref, allow, timeout, device, profile_call=False, atlas=None, key=None, breakdown=NONE):
    """One call on latents z, judged in this process: {"time_s", "status", "reason", "figures", ...}.
    ref: the fp32 decode of z (fp16, CPU), or the release's; allow: {"max_abs", "rms"}, and with "tile" a secret
    fp32 tile (fresh.TileCheck: max|d| there, rms(d) over the video estimated with it). With an atlas (harness/report/error_maps.py), a
    call whose figures fail (every call, with the atlas's `every`) is mapped from the same copy of out, kept under
    `key`, and its words are the record's `error_map`."""
    import torch
    try:
        with breakdown.part("calls"):
            seconds, read1, reports, problems, arrivals = group.call(z, timeout, profile=profile_call)
        with breakdown.part("checks"):
            figs = checks.figures(read1, ref, device)
            settled = group.settled(read1)
    except torch.cuda.OutOfMemoryError as e:      # read 1 and the figures are the judge's work on the GPU
        raise group.short_of_gpu_memory(e) from e
    problems = list(problems)
    status, reason = checks.judge(figs, allow)
    tile = allow.get("tile")          # the secret fp32 tile of a long fresh draw (fresh.TileCheck)
    by_tile = False
    if tile is not None:
        with breakdown.part("checks"):
            tile_figs, tile_status, tile_reason = tile.judge(read1, figs["rms"], device)
        if status == "passed":      # a failing video's tile adds no news
            status, reason, by_tile = tile_status, tile_reason, tile_status != "passed"
    if status != "passed":
        problems.append((status, reason))
    if not settled:
        problems.append(("tampering", "out changed after done: a rank reported done before its work was finished"))
    group.quiet()
    with breakdown.part("checks"):
        # A tile's failure is mapped by its reason (where the tile is): a map against the release decode, which
        # the video passed, would show nothing over its allowance.
        wanted = atlas and atlas.wanted("passed" if by_tile else status)
        error_map = atlas.take(key, read1, ref, device, allow, group.world) if wanted else None
    status, reason = checks.worst(problems)
    video = read1.numel() * 2
    peaks = [None if r.get("peak") is None else r["peak"] + z.numel() * 2 + (video if i == 0 else 0)
             for i, r in enumerate(reports)]
    call = {"time_s": seconds, "status": status, "reason": reason, "figures": figs, "done_s": arrivals,
            "rank_s": [(r["t1"] - r["t0"]) / 1e9 for r in reports], "peak_bytes": peaks}
    if tile is not None:
        call["tile"] = {"where": tile.tile.label(), "figures": tile_figs,
                        "allowance": {k: tile.allowance[k] for k in ("max_abs", "rms")}}
    if error_map:
        call["error_map"] = error_map
    return call


class BenchPlan:
    def __init__(self, args, solutions, geometry, cpu, console, run, sampler, breakdown=None):
        self.args, self.solutions, self.geometry, self.cpu, self.console = args, solutions, geometry, cpu, console
        self.wave = solutions           # the solutions whose groups are alive at once (waves())
        self.at_once = len(solutions)
        self.run, self.sampler = run, sampler
        self.groups, self.info, self.traces = {}, {}, {}       # traces: the bytes kept of each solution's
        self.device = "cpu" if cpu else "cuda:0"
        self.breakdown = breakdown or Breakdown()
        self.fresh = Fresh(geometry, self.device, breakdown=self.breakdown)
        self.atlas = error_maps.Atlas(geometry, every=args.maps, report=args.report)
        self.peaks = bounds.peaks_for(cpu, args.gpu_name)

    def waves(self, frames):
        """The solutions in waves that run one after another, each its whole plan: as many at once as GPU memory lets
        each group keep at least its floor (Session.groups_at_once), or --at-once. A solution that failed to load or
        build is in the first."""
        alive = [s for s in self.solutions if not (s.get("load_error") or s.get("build_error"))]
        broken = [s for s in self.solutions if s not in alive]
        k = self.run.groups_at_once(self.fresh, max(frames), len(alive)) if alive else 1
        k = max(1, min(k, self.args.at_once or k))
        self.at_once = k
        out = [alive[i:i + k] for i in range(0, len(alive), k)] or [[]]
        out[0] = broken + out[0]
        return out

    def start_wave(self, wave, frames):
        """The judge's own GPU work measured and the groups' GPU memory capped (Session.reserve_for_judge), before any
        group of the wave starts; every group of the wave's solutions of a world is alive at once."""
        self.close()
        self.wave = wave
        self.run.keep_buffers(len(wave))
        alive = sum(not (s.get("load_error") or s.get("build_error")) for s in wave)
        self.run.reserve_for_judge(self.fresh, max(frames), groups=max(1, alive))

    def group(self, sol, world, frames):
        key = (sol["name"], world)
        if key not in self.groups:
            if not any(w == world for _, w in self.groups):
                # Every solution's buffers of this world before its first group starts: a group's GPU memory cap
                # counts what the judge holds (harness/isolation/gpu_memory.py), which must not grow under a group
                # that started.
                for other in self.wave:
                    if not (other.get("load_error") or other.get("build_error")):
                        self.run.buffers_for(self.wave.index(other), world, max(frames))
            buffers = self.run.buffers_for(self.wave.index(sol), world, max(frames))
            # The other groups are parked (frozen, their CUDA held) from the end of their start or call to their next.
            with self.breakdown.part("starts"):
                self.groups[key] = Group(sol["desc"], world, self.geometry, self.cpu, buffers, self.run, frames,
                                         self.run.lock, profiling=bool(self.args.profile))
            self.info.setdefault(sol["name"], self.groups[key].info)
        return self.groups[key]

    def drop(self, sol, world, graceful=False):
        g = self.groups.pop((sol["name"], world), None)
        if g is not None:
            g.close(graceful)

    def run_workload(self, workload, frames, progress):
        """The calls of the wave's solutions at one workload; returns {solution name: record}.

        An untimed workload gets a call on its stored latents, its shape's first, then one on fresh latents, which
        the first must not beat beyond noise (the stored clips are prefixes of one another: a process that decoded
        the longer one knows the shorter one's video). A timed one: warm-up calls and timed calls on fresh
        latents, except one timed call at a secret position on the stored latents; then REPEATS calls on the stored
        latents again, which the solution has now seen: they must not be faster than the warm fresh ones beyond noise
        ("faster on repeated inputs"), judged after a second look (LOOKS more fresh calls) where they are, or where
        no warm fresh call was timed. Every call is checked in full: a fresh call against the judge's own decode
        of it (fp32 on the CPU; on GPUs the release bf16 decode, the allowance widened by the release's error)."""
        e = spec.WORKLOADS[workload]
        world, timed, clip = e.world, e.timed, e.clip
        t = spec.CLIPS[clip]["latent_frames"]
        stored = (spec.make_inputs(workload, "cpu", self.geometry)[0], spec.load_reference(clip, self.geometry),
                  spec.allowance(clip, self.geometry))
        stored_at = secrets.randbelow(self.args.min_reps)
        records, active = {}, []
        for sol in self.wave:
            rec = {"workload": workload, "world": world, "clip": clip, "timed": timed, "status": None,
                   "passed": False, "reason": None, "allowance": stored[2], "calls": [], "samples_s": [],
                   "repeat_s": []}
            records[sol["name"]] = rec
            if sol.get("load_error"):
                rec.update(status="load error", reason=sol["load_error"])
                continue
            if sol.get("build_error"):
                rec.update(status="build error", reason=sol["build_error"])
                continue
            try:
                self.group(sol, world, frames)
            except GroupFailed as err:
                self.fail(sol, world, rec, err)
                continue
            active.append(sol)
        warmups = self.args.warmup if timed else 0
        spent = {s["name"]: 0.0 for s in active}
        looks = {}           # solution name: second-look calls left
        # The references of the calls most runs make, decoded before the first call: the judge's own GPU work then
        # stays out of the gaps between timed calls (a GPU kept busy runs the next call warmer, hence slower).
        self.fresh.forget()
        before = self.breakdown.spent["references"]
        draws = [(i, sol) for i in range(warmups + self.args.min_reps if timed and active else 0)
                 if i - warmups != stored_at for sol in active]
        if draws:       # the judge's longest silent step: said before and after, on a terminal and in a log
            self.console.print(f"{workload}: decoding the references of {len(draws)} draws of fresh latents")
        for i, sol in draws:
            self.fresh.checked(f"{workload}/{self.solutions.index(sol)}/{i}", t)
        if draws:
            self.console.print(f"{workload}: references decoded in "
                               f"{self.breakdown.spent['references'] - before:.0f} s; calls follow")
        task = progress.add_task(workload, total=(warmups + (self.args.min_reps if timed else 2)) * max(1, len(active)))
        while active:
            for sol in list(active):
                rec = records[sol["name"]]
                i = len(rec["calls"])
                done_timing = timed and self.finished(rec, spent[sol["name"]])
                kind = "fresh" if looks.get(sol["name"]) else ("stored" if i == 0 else "fresh") if not timed else \
                    "stored" if i - warmups == stored_at else "repeat" if done_timing else "fresh"
                # Each solution its own draws: one that decoded them could not hand them to another.
                key = f"{workload}/{self.solutions.index(sol)}/{i}"
                if kind == "fresh":
                    self.fresh.give(key)
                z, ref, allow = stored if kind != "fresh" else self.fresh.checked(key, t)
                timeout = call_timeout(t, world, self.geometry, self.cpu, self.args.timeout_scale, first=not i)
                self.sampler.start(world)
                try:
                    call = judged(self.groups[(sol["name"], world)], z, ref, allow, timeout, self.device,
                                  atlas=self.atlas, key=(sol["name"], workload), breakdown=self.breakdown)
                except GroupFailed as err:
                    self.sampler.stop()
                    self.fail(sol, world, rec, err)
                    active.remove(sol)
                    continue
                call.update(warmup=i < warmups, inputs=kind, clocks=self.sampler.stop(),
                            second_look=bool(looks.get(sol["name"])),
                            reference="fp32" if kind != "fresh" or self.cpu else "release bf16")
                floored(call, t, world, self.peaks, self.geometry)
                rec["calls"].append(call)
                spent[sol["name"]] += call["time_s"]
                progress.advance(task)
                if call["status"] != "passed":
                    rec.update(status=call["status"], reason=call["reason"])
                    active.remove(sol)
                    continue
                if call["second_look"]:
                    looks[sol["name"]] -= 1
                elif kind == "repeat":
                    rec["repeat_s"].append(call["time_s"])
                elif i >= warmups and timed:
                    rec["samples_s"].append(call["time_s"])
                if not looks.get(sol["name"]) and (len(rec["calls"]) >= 2 if not timed else
                                                   len(rec["repeat_s"]) >= REPEATS):
                    verdict = parity(rec, self.cpu)
                    # A machine's noise or a cold call can make a lone bar look high: a second look, LOOKS more
                    # fresh calls, before the verdict (a solution can only slow them).
                    if verdict != {} and sol["name"] not in looks:
                        looks[sol["name"]] = LOOKS
                        continue
                    rec.update(status="passed", passed=True)
                    rec.update(verdict or {})
                    active.remove(sol)
                    if self.args.profile and rec["passed"]:
                        key = f"{workload}/{self.solutions.index(sol)}/profile"
                        self.fresh.give(key)
                        self.profile_call(sol, world, workload, rec, *self.fresh.checked(key, t))
        progress.remove_task(task)
        self.fresh.forget()
        for name, rec in records.items():
            self.summarise(rec)
            # The workload's worst mapped call (a failing call ends the workload, so it is that one).
            error_map = self.atlas.draw((name, workload), f"{name} {workload}: {rec['status']}")
            if error_map:
                rec["error_map"] = error_map
        return records

    def profile_call(self, sol, world, workload, rec, z, ref, allow):
        """One more call (checked, not counted) under the profiler with the named scopes on, on fresh latents (on the
        stored ones, seen by then, it could be a replay) and held to the roofline's floor. Each rank's trace is
        taken from where the judge put it (its scratch folder), capped (harness/isolation/disk.py); a trace that is
        missing, too large (alone, or with the solution's earlier ones: disk.TRACES_CAP), not a regular file or not a
        trace fails the solution's workload, and none of the call's traces is kept."""
        os.makedirs(self.args.profile, exist_ok=True)
        prefix = os.path.abspath(os.path.join(self.args.profile, f"{sol['name']}-{workload}"))
        timeout = 3 * call_timeout(z.shape[2], world, self.geometry, self.cpu, self.args.timeout_scale)
        group = self.groups[(sol["name"], world)]
        ranks = []
        try:
            call = judged(group, z, ref, allow, timeout, self.device, profile_call=True)
            floored(call, z.shape[2], world, self.peaks, self.geometry)
            if call["status"] != "passed":   # checked as every call is: a decode wrong only when profiled fails
                raise GroupFailed(call["status"], f"the profiled call: {call['reason']}")
            for r in range(world):
                path = f"{prefix}-rank{r}.json"
                try:
                    kept = self.traces.get(sol["name"], 0)
                    self.traces[sol["name"]] = kept + disk.copy_trace(group.trace(r), path, kept=kept)
                    scopes, communication = profile.summarise(path, not self.cpu)
                    ranks.append({"rank": r, "trace": path, "call_s": call["done_s"][r],     # the judge's clock
                                  "scopes": scopes, "communication": communication})
                except disk.Refused as e:
                    raise GroupFailed(e.status, f"profile: rank {r}: {e.reason}", r)
                except Exception as e:      # the file is the solution's: an error reading it is its failure
                    raise GroupFailed("runtime error", f"profile: rank {r}'s trace is not a Chrome trace "
                                                       f"({type(e).__name__}: {str(e)[:200]})", r)
        except GroupFailed as err:
            for r in range(world):       # a failed profiled call keeps none of its traces
                with contextlib.suppress(OSError):
                    os.unlink(f"{prefix}-rank{r}.json")
            self.fail(sol, world, rec, err)
            return
        rec["profile"] = {"status": call["status"], "time_s": call["time_s"], "ranks": ranks}
        with open(prefix + "-scopes.json", "w") as f:
            json.dump(rec["profile"], f, indent=1)
        self.console.print(profile.profile_report(sol["name"], workload, rec["profile"]))

    def finished(self, rec, spent):
        """Whether the timed calls may stop (then come the repeats)."""
        n = len(rec["samples_s"])
        if n < self.args.min_reps:
            return False
        if n >= self.args.max_reps or spent >= self.args.time_cap:
            return True
        s = checks.stats(rec["samples_s"])
        return s["se_median_s"] <= 0.005 * s["median_s"]

    def fail(self, sol, world, rec, err):
        tail = ""
        g = self.groups.get((sol["name"], world))
        if g is not None and err.rank is not None:
            tail = g.log_tail(err.rank)
        rec.update(status=err.status, passed=False, reason=err.message, log_tail=tail or None)
        self.drop(sol, world)

    def summarise(self, rec):
        calls = rec["calls"]
        # The record's figures are against the fp32 decode (on GPUs a fresh call's are against the release's).
        checked = [c["figures"] for c in calls if c.get("figures") and c.get("reference", "fp32") == "fp32"]
        if checked:
            rec["max_abs"] = max(f["max_abs"] for f in checked)
            rec["rms"] = max(f["rms"] for f in checked)
            rec["psnr_db"] = min(f["psnr_db"] for f in checked)
        # Each call's are the ranks' own reports, each typed alone: a rank may give a number on one call, none
        # on the next. A rank's peak is the largest it gave; none where some rank gave none.
        peaks = [c["peak_bytes"] for c in calls if c.get("peak_bytes")]
        given = [[p[r] for p in peaks if p[r] is not None] for r in range(len(peaks[0]))] if peaks else []
        if given and all(given):
            rec["peak_bytes"] = [max(g) for g in given]
        rec["throttled_calls"] = sum(1 for c in calls if (c.get("clocks") or {}).get("throttled"))
        if rec["timed"] and rec["passed"] and rec["samples_s"]:
            s = checks.stats(rec["samples_s"])
            rec.update(s)
            rec["tflops"] = spec.work(rec["workload"], self.geometry)["flops"] / s["median_s"] / 1e12
            if not self.cpu and self.args.gpu_key:
                rec["bound_s"] = bounds.bound(rec["workload"], self.args.gpu_key, self.geometry)["bound_s"]
                rec["roofline"] = rec["bound_s"] / s["median_s"]
        else:
            rec.setdefault("median_s", None)

    def close(self):
        for key in list(self.groups):
            self.groups.pop(key).close(graceful=True)
