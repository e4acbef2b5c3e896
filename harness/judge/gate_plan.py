"""The gate's plan (ci.py): the audit (in a child process, while the first world's references decode and its group
starts), then per world fresh latents and every stored workload through the same rank processes and judge as bench,
each call checked in this process, and the roofline floor.

Fresh latents exist nowhere on disk (harness/judge/fresh.py). For each world: --fresh-calls draws of f5's shape and
of the timed shapes of the world's workloads, each verified in full against the gate's own decodes of them
(fp32_check: the whole fp32 decode; on GPUs, the release bf16 decode widened and a secret tile in fp32; with
--release the release's alone, a partial check); and each stored workload twice, longest first, the first at a
secret place among its shape's fresh calls, the second (after them) on latents the solution has seen, which must not
run faster than the fresh calls of that shape beyond noise (bench's tolerance, bench_plan.too_fast): the fastest of
a timed shape's fresh draws, an untimed shape's call on fresh latents after its warm-up (a shape's first call may
compile or autotune), never a process's first call; every call is verified in full (one checked in part could be
wrong in the rest, or skip work to lower the bar). A stored call placed before fresh calls of its shape is judged
after them. A call that looks too fast, or has no bar, gets a second look: two more fresh calls of its shape,
verified in full, against which its own time is judged again (a machine that became quieter speeds them too; a
solution can only slow them).

Every call is held to the task's rule, not only the stored ones: the secret place of a stored call is no defence
the gate can rest on, since a solution that learns a few bits of the stored latents (at world 1, from its repeats)
can carry them to its later groups or runs by channels no sandbox closes (the host's pid counter, the page cache of
its own files) and tell its stored calls from fresh ones there."""
import json
import os
import secrets
import subprocess
import sys
import time

import bounds
import spec
from harness.judge import checks, hardware
from harness.judge.bench_plan import call_timeout, floored, judged, too_fast
from harness.judge.breakdown import Breakdown
from harness.judge.fresh import Fresh
from harness.judge.group import Group, GroupFailed
from harness.judge.session import ROOT, Session, excluded
from harness.report import error_maps
from harness.report.console import plain

FRESH_LATENT_FRAMES = 2                              # the fresh clips: f5's shape (first chunk + one more)
# The audit of the largest honest solution takes seconds; its regexes and walks over a source built to be slow to
# read must fail the gate, never hang it.
AUDIT_S = 120


def fp32_check(args, cpu):
    """How the gate holds a long fresh draw to the task's fp32 rule (fresh.CHECKS): --fp32 as given; by default the
    whole video on the CPU (the tiny decode is cheap) and a secret tile on GPUs; --release (GPUs) drops it."""
    if args.release and not cpu:
        return "release"
    return args.fp32 or ("video" if cpu else "tile")


class Gate:
    def __init__(self, args, console, add):
        self.args, self.console, self.add = args, console, add
        gpus, name = (0, None) if args.tiny else hardware.detect_gpus()
        self.cpu = args.tiny or gpus == 0
        hardware.one_thread_on_the_cpu(self.cpu)
        self.gpus = gpus
        self.geometry = spec.TINY if self.cpu else spec.FULL
        self.peaks = bounds.peaks_for(self.cpu, name)
        self.device = "cpu" if self.cpu else "cuda:0"
        self.run_ = None
        self.audit_proc = self.audit_started = None
        self.atlas = error_maps.Atlas(self.geometry, every=args.maps, report=args.report)
        self.info, self.solution = {}, None     # each world's ranks as they started; the solution described
        self.review = []                        # the audit's review notes (they fail only with --strict)
        self.breakdown = Breakdown()
        self.check = fp32_check(args, self.cpu)

    def start_audit(self):
        """audit.py in a child process, started first so that it reads the solution while the judge makes its data
        and decodes its references and the first group starts (seconds of the gate's wall time); audit() takes its
        verdict."""
        self.audit_started = time.monotonic()
        if not self.args.no_audit:
            self.audit_proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "audit.py"), self.args.solution,
                                                "--json", "-"], cwd=ROOT, stdout=subprocess.PIPE,
                                               stderr=subprocess.PIPE, text=True)

    def audit(self):
        """The verdict of start_audit's child, by a deadline (AUDIT_S from its start, times --timeout-scale where
        that is above 1: a scale that shortens the calls' deadlines would fail an honest audit on a loaded
        machine), or a failure. Once: after the first group starts, before its first call."""
        if self.audit_started is None:
            return
        started, proc, self.audit_started, self.audit_proc = self.audit_started, self.audit_proc, None, None
        if proc is None:
            self.add("audit", "skipped", "--no-audit")
            return
        limit = AUDIT_S * max(1.0, self.args.timeout_scale)
        try:
            out, err = proc.communicate(timeout=max(0.0, limit - (time.monotonic() - started)))
            found = json.loads(out) if proc.returncode in (0, 1) else None
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            self.add("audit", "audit", f"the audit did not finish in {limit:.0f} s: a source that slows its reading "
                                       f"is not audited")
            return
        except ValueError:
            found = None
        if found is None:
            self.add("audit", "audit", f"the audit failed (exit {proc.returncode}): {err.strip()[-300:]}")
            return
        allowed = [f"{a['file']}:{a['line']}: {a['rule']}: {a['reason']} -- {a['allowance']}" for a in found["allowed"]]
        self.review = [{k: f[k] for k in ("file", "line", "rule", "reason", "look", "text")} for f in found["review"]]
        failing = [f"{f['file']}:{f['line']}: {f['rule']}: {f['reason']}" for f in found["failures"]]
        if self.args.strict:
            failing += [f"{f['file']}:{f['line']}: {f['rule']} (a review note; --strict): {f['reason']}"
                        for f in found["review"]]
        if failing:
            self.add("audit", "audit", f"{len(failing)} failing finding(s): " + "; ".join(failing[:12]),
                     findings=failing, allowed=allowed)
        else:
            self.add("audit", "passed", allowed=allowed,
                     **({"notes": len(self.review)} if self.review else {}))

    def stored_case(self, workload):
        clip = spec.WORKLOADS[workload].clip
        return spec.make_inputs(workload, "cpu", self.geometry)[0], spec.load_reference(clip, self.geometry), \
            spec.allowance(clip, self.geometry)

    def plan(self, workloads, world):
        """[(check name, latent frames, case)] of one world, in order. A case is ("fresh", key) (verified in full: a
        draw of f5's shape or of a timed shape, or an untimed shape's call after its warm-up; the bar for its shape's
        stored calls), ("warm", key) (verified in full: a shape's first call, which may autotune, so never a bar),
        ("stored", workload) or ("repeat", workload) (the same latents again: it must not be much faster).

        A stored call stands at a secret place among the fresh calls of its shape (after the warm-up, where there is
        one), as in bench: a solution that counted its calls would know which one is stored."""
        def frames(w):
            return spec.WORKLOADS[w].latent_frames
        # Longest first: the stored clips are prefixes of one another, and a stored call after a shorter one of the
        # same source could resume that one's decode; after a longer one it can only replay, which its shape's
        # fresh calls show.
        mine = sorted((w for w in workloads if spec.WORKLOADS[w].world == world), key=frames, reverse=True)
        # The timed shapes of this world's own workloads: a run of some workloads draws nothing it did not ask for.
        timed = {frames(w) for w in mine if spec.WORKLOADS[w].timed}

        def fresh(t):
            clip = next(c for c, e in spec.CLIPS.items() if e["latent_frames"] == t)
            # Draws of each world's own: the stored latents are the same at every world, fresh ones are not.
            return [(f"fresh {clip} #{k + 1} x{world}", t, ("fresh", f"{clip}/x{world}/{k}"))
                    for k in range(self.args.fresh_calls)]
        todo = [(f"fresh latents #{k + 1} x{world}", FRESH_LATENT_FRAMES, ("fresh", f"{world}/{k}"))
                for k in range(self.args.fresh_calls)]
        seen = {FRESH_LATENT_FRAMES}
        for w in mine:
            t, clip = frames(w), spec.WORKLOADS[w].clip
            if t in timed:
                head, block = [], fresh(t)
            else:           # a shape's first call may autotune: a warm-up, where no call of its shape came before
                head = [] if t in seen else [(f"warm-up {clip} x{world}", t, ("warm", f"{world}/{w}"))]
                block = [(f"fresh {clip} x{world}", t, ("fresh", f"{world}/{w}/fresh"))]
            seen.add(t)
            block.insert(secrets.randbelow(len(block) + 1), (w, t, ("stored", w)))
            todo += head + block + [(f"{w} repeat", t, ("repeat", w))]
        return todo

    def case(self, t, key):
        """(z, reference, allowance) of a call on latents never seen, drawn and decoded now."""
        self.fresh.give(key)
        z = self.fresh.draw(key, t)
        return (z, *self.fresh.full(z, self.check, key))

    def call(self, group, name, t, world, case, first):
        z, ref, allow = case
        timeout = call_timeout(t, world, self.geometry, self.cpu, self.args.timeout_scale, first=first)
        call = judged(group, z, ref, allow, timeout, self.device, atlas=self.atlas, key=name, breakdown=self.breakdown)
        return floored(call, t, world, self.peaks, self.geometry)

    def run(self, workloads):
        """Run the plan on `workloads` (those this machine can run), the audit beside its first steps."""
        self.start_audit()
        try:
            self.run_plan(workloads)
        finally:
            self.audit()        # where the plan stopped before its first group

    def run_plan(self, workloads):
        import data.make
        from harness.load.solution import SolutionError, build_in_child, describe
        args = self.args
        if args.release and not self.cpu:
            self.add("fp32 checks", "skipped", "--release: the long fresh clips checked against the release bf16 "
                                               "decode, the allowance widened by its error")
        # f1 and f5 too: the allowances of fresh latents' first frames
        clips = sorted({spec.WORKLOADS[w].clip for w in workloads} | {"f1", "f5"}, key=list(spec.CLIPS).index)
        with self.breakdown.part("data"):
            data.make.ensure(clips, self.geometry)
        try:
            desc = describe(args.solution)
        except SolutionError as e:       # the solution's own failure, never the harness's
            self.add("load", "load error", plain(e))
            return
        self.solution = {"name": desc.name, "path": desc.path, "hash": desc.content_hash}
        if desc.manifest.get("sources"):
            with self.breakdown.part("builds"):
                err = build_in_child(desc.path, timeout=1200, exclude=excluded(not args.no_isolation))
            if err:
                self.add("build", "build error", plain(err))
                return
        run = self.run_ = Session(self.geometry, self.cpu, isolation=not args.no_isolation)
        if run.lock is None and not args.no_isolation:
            self.add("isolation", "no isolation", "this platform offers no sandbox for the ranks (Landlock); "
                                                  "pass --no-isolation to check without one (not a certificate)")
            return
        worlds = sorted({spec.WORKLOADS[w].world for w in workloads} | {1})
        plans = {world: self.plan(workloads, world) for world in worlds}
        frames = {t for p in plans.values() for _, t, _ in p}
        self.buffers = run.buffers_for(0, max(worlds), max(frames))
        self.fresh = Fresh(self.geometry, self.device, args.seed, breakdown=self.breakdown)
        run.reserve_for_judge(self.fresh, max(frames), groups=1)     # one group alive at a time
        for world in worlds:
            self.world(desc, world, frames, plans[world])

    def world(self, desc, world, frames, todo):
        group, first, times = None, True, {}
        # Read before the group starts: the judge's reads of the data during its calls (which a process of the
        # solution's may see through the files' access times) must not tell its stored calls from the others.
        self.stored = {key: self.stored_case(key) for _, _, (kind, key) in todo if kind in ("stored", "repeat")}
        # And every planned draw decoded before it too: between two calls the judge then does the same work whatever
        # the next call is (a gap spent decoding a reference, which a solution can time, would tell the fresh calls
        # from the stored ones).
        draws = [(t, key) for _, t, (kind, key) in todo if kind not in ("stored", "repeat")]
        how = {"video": "fp32", "tile": "release bf16 and a secret fp32 tile of the long ones",
               "release": "release bf16 of the long ones"}[self.check]
        self.console.print(f"x{world}: decoding the references of {len(draws)} draws of fresh latents ({how}), "
                           f"then the calls")
        before = self.breakdown.spent["references"]
        drawn = {key: self.case(t, key) for t, key in draws}
        self.console.print(f"x{world}: references decoded in {self.breakdown.spent['references'] - before:.0f} s")
        # A seen call is judged after the last fresh call of its shape in this world's plan: the more fresh calls
        # the bar has, the less one quiet moment of a loaded machine makes an honest call look too fast.
        last = {t: i for i, (_, t, (kind, _)) in enumerate(todo) if kind == "fresh"}
        pending = []

        def settle(ready):
            """Judge and record the waiting seen calls `ready` (a second look needs the group: none where it failed)."""
            for item in ready:
                pending.remove(item)
                name, t, call = item
                try:
                    if group is not None:
                        self.parity(group, name, t, world, call, times)
                finally:
                    self.record(desc, name, call)

        def failed(name, e):
            """Record a group's failure and whatever waited; True where the world stops (a hang repeats, and each
            costs the whole timeout)."""
            nonlocal group
            self.add(name, e.status, e.message + (f"\n{group.log_tail(e.rank)}" if e.rank is not None else ""))
            group.close(graceful=False)
            group = None
            settle(list(pending))
            if e.status == "timeout":
                self.add(f"rest of x{world}", "timeout", "not run: a call at this world hung")
            return e.status == "timeout"
        for i, (name, t, (kind, key)) in enumerate(todo):
            if group is None:
                try:
                    with self.breakdown.part("starts"):
                        group, first = Group(desc, world, self.geometry, self.cpu, self.buffers, self.run_, frames,
                                             self.run_.lock), True
                    self.info.setdefault(f"x{world}", group.info)
                    self.audit()     # its verdict before the first call: no call shares the CPU with it
                except GroupFailed as e:
                    settle(list(pending))
                    self.add(f"start x{world}", e.status, e.message)
                    return
            seen = kind in ("stored", "repeat")
            try:
                case = self.stored[key] if seen else drawn.pop(key)
                call = self.call(group, name, t, world, case, first)
                if seen and last.get(t, -1) < i:
                    self.parity(group, name, t, world, call, times)
            except GroupFailed as e:
                if failed(name, e):
                    return
                continue
            if not seen and not first and kind != "warm" and call["status"] == "passed":
                # a process's first call pays for its start, a shape's for its JIT; a failed call sets no bar
                times.setdefault(t, []).append(call["time_s"])
            first = False
            if seen and last.get(t, -1) > i:
                pending.append((name, t, call))
            else:
                self.record(desc, name, call)
            try:
                settle([p for p in pending if last[p[1]] == i])
            except GroupFailed as e:
                if failed(f"second look after {name}", e):
                    return
        if group is not None:
            group.close(graceful=True)

    def parity(self, group, name, t, world, call, times):
        """A call on latents a process may have seen must not be faster than the fresh calls of its shape; with no
        bar yet, or too fast for it, a second look sets one and the call is judged again."""
        bar = times.get(t)
        if bar and not too_fast([call["time_s"]], bar, self.cpu):
            return
        more = self.second_look(group, t, world, name, times.setdefault(t, []))
        why = too_fast([call["time_s"]], times[t], self.cpu)
        more += [("tampering", why)] if why else []
        if more:
            problems = [] if call["status"] == "passed" else [(call["status"], call["reason"])]
            call["status"], call["reason"] = checks.worst(problems + more)

    def record(self, desc, name, call):
        error_map = self.atlas.draw(name, f"{desc.name} {name}: {call['status']}")
        self.add(name, call["status"], call["reason"], call["time_s"], figures=call["figures"],
                 **({"error_map": error_map} if error_map else {}), **({"tile": call["tile"]} if "tile" in call else {}))

    def second_look(self, group, t, world, name, fresh):
        """After a call on seen latents looked too fast, or came with no fresh call of its shape to judge it by
        (with --fresh-calls 1 a world's only fresh call of f5's shape is its process's first, never a bar): two more
        calls of its shape on latents never seen (verified in full), whose times join `fresh`. The flagged call's
        own time stands: a machine that was loaded during the earlier fresh calls and is quiet now speeds these too,
        while a solution can only make its fresh calls slower, never faster than its work (so it cannot talk its way
        past a replay, as it could if the latents were sent again). Returns the problems of these two calls; the
        caller judges the flagged time again."""
        # Keyed by the flagged check: a stored call's look and its repeat's are other latents (the same ones would
        # let the repeat replay what the look's calls decoded).
        calls = [self.call(group, f"{name} second look #{k + 1}", t, world,
                           self.case(t, f"{world}/{name}/second look/{k}"), False) for k in range(2)]
        fresh += [c["time_s"] for c in calls if c["status"] == "passed"]
        return [(c["status"], f"on a second look: {c['reason']}") for c in calls if c["status"] != "passed"]

    def close(self):
        if self.audit_proc is not None:
            self.audit_proc.kill()
            self.audit_proc.communicate()
        if self.run_ is not None:
            self.run_.close()
