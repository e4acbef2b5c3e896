"""bench_plan's parity of calls on latents a solution had or could have seen against calls on latents it never saw:
the tolerance and its noise, and bench's second look, on scripted calls (no rank processes)."""
from types import SimpleNamespace

import pytest
import torch

import spec
from harness.judge import bench_plan, fresh as fresh_module


def test_slowed_fresh_calls_do_not_widen_the_parity_tolerance():
    """bench_plan.parity's noise is the spread of the faster half of the fresh calls, and at most doubles the base
    tolerance: a replay beside fresh calls padded eightfold is still too fast, an honest noisy record is not."""
    noise, parity = bench_plan.noise, bench_plan.parity

    def record(fresh, stored, repeats):
        calls = [{"time_s": t, "inputs": "fresh"} for t in fresh] + [{"time_s": stored, "inputs": "stored"}]
        return {"calls": calls + [{"time_s": t, "inputs": "repeat"} for t in repeats], "repeat_s": list(repeats)}
    padded = [0.50, 0.52, 4.1, 0.51, 4.3]
    assert noise(padded) == pytest.approx(0.02 / 0.50)
    assert parity(record(padded, 0.06, [0.06, 0.06]), cpu=True)["status"] == "tampering"
    assert parity(record(padded, 0.06, [0.06, 0.06]), cpu=False)["status"] == "tampering"
    # Most calls slowed: the noise is wide, but the tolerance stops at twice the base (20% on GPUs).
    assert noise([1.0, 3.0, 3.1, 3.2, 3.3]) > 1
    slowed = parity(record([1.0, 3.0, 3.1, 3.2, 3.3], 0.78, [0.8, 0.8]), cpu=False)
    assert "faster on repeated inputs" in slowed["reason"]
    assert parity(record([1.0, 1.05, 1.1, 1.02, 1.3], 0.97, [0.99, 1.0]), cpu=False) == {}
    assert parity(record([1.0, 1.05, 1.1, 1.02, 1.3], 0.52, [0.6, 0.7]), cpu=True) == {}
    # The only fresh call is the workload's first (it may compile): no bar to judge by.
    assert parity(record([3.0], 0.5, [0.5, 0.5]), cpu=True) is None


class Scripted:
    """A group whose calls take `seconds(kind)`: "stored" for the stored latents, "fresh" for any other; the first
    call of the group adds `cold` seconds."""

    def __init__(self, seconds, cold):
        self.seconds, self.cold, self.calls, self.stored = seconds, cold, 0, None

    def judged(self, group, z, *args, **kwargs):
        t = self.seconds("stored" if z is self.stored else "fresh") + (self.cold if not self.calls else 0.0)
        self.calls += 1
        return {"time_s": t, "status": "passed", "reason": None, "figures": None, "done_s": [t], "rank_s": [t],
                "peak_bytes": [None]}


def scripted_run(monkeypatch, script, stored_at, warmup=0, reps=2):
    """One timed workload's record on the scripted group, the stored call at position `stored_at`."""
    z = torch.zeros(1)
    script.stored = z
    monkeypatch.setattr(spec, "make_inputs", lambda *a, **k: (z,))
    monkeypatch.setattr(spec, "load_reference", lambda *a, **k: None)
    monkeypatch.setattr(spec, "allowance", lambda *a, **k: {"max_abs": 1.0, "rms": 1.0})
    monkeypatch.setattr(bench_plan.secrets, "randbelow", lambda n: stored_at)
    monkeypatch.setattr(bench_plan, "judged", script.judged)
    monkeypatch.setattr(bench_plan.bounds, "impossible", lambda *a, **k: None)

    class Fresh:
        give = fresh_module.Fresh.give        # each draw to one call: the bench plan's keys must hold to it here too

        def __init__(self, *a, **k):
            self.given = set()

        def checked(self, key, t):
            return torch.ones(1), None, {"max_abs": 1.0, "rms": 1.0}

        def forget(self):
            pass
    monkeypatch.setattr(bench_plan, "Fresh", Fresh)
    args = SimpleNamespace(warmup=warmup, min_reps=reps, max_reps=reps, time_cap=1e9, timeout_scale=1.0, maps=False,
                           report=None, gpu_name=None, profile=None, gpu_key=None)
    sol = {"name": "s", "desc": None}
    run = SimpleNamespace(buffers_for=lambda slot, world, frames: None)     # the judge's buffers: none needed here
    console = SimpleNamespace(is_terminal=True, print=lambda *a, **k: None)
    r = bench_plan.BenchPlan(args, [sol], spec.TINY, True, console, run, SimpleNamespace(start=lambda w: None,
                                                                                       stop=lambda: None))
    r.group = lambda sol, world, frames: r.groups.setdefault((sol["name"], world), object())
    progress = SimpleNamespace(add_task=lambda *a, **k: 0, advance=lambda t: None, remove_task=lambda t: None)
    workload = next(w for w, e in spec.WORKLOADS.items() if e.timed and e.world == 1)
    return r.run_workload(workload, [spec.CLIPS[spec.WORKLOADS[workload].clip]["latent_frames"]], progress)["s"]


@pytest.mark.parametrize("stored_at", [0, 1])
def test_a_cold_first_call_is_no_bar_for_an_honest_solution(monkeypatch, stored_at):
    """Without warm-up the workload's first call is timed, and cold (compiling): an honest solution passes wherever
    the stored call falls, with a second look where the cold call was the only fresh one."""
    rec = scripted_run(monkeypatch, Scripted(lambda kind: 0.5, cold=0.7), stored_at)
    assert rec["status"] == "passed", rec["reason"]
    looked = [c for c in rec["calls"] if c["second_look"]]
    assert len(looked) == (bench_plan.LOOKS if stored_at == 1 else 0), rec["calls"]
    assert all(c["inputs"] == "fresh" for c in looked) and len(rec["samples_s"]) == 2


@pytest.mark.parametrize("stored_at", [0, 1])
def test_a_replay_stays_too_fast_after_the_second_look(monkeypatch, stored_at):
    """Seen latents decoded in a fifth of the time: tampering, judged after the second look where one was taken."""
    rec = scripted_run(monkeypatch, Scripted(lambda kind: 0.1 if kind == "stored" else 0.5, cold=0.7), stored_at)
    assert rec["status"] == "tampering" and "faster on repeated inputs" in rec["reason"], rec
    assert len([c for c in rec["calls"] if c["second_look"]]) == bench_plan.LOOKS


def test_a_noisy_fresh_call_gets_a_second_look(monkeypatch):
    """One fresh bar made slow by the machine (a warm-up first): the second look's calls set the bar."""
    times = iter([0.5, 0.5, 1.6, 0.5, 0.5, 0.5, 0.5])     # warm-up, stored, slowed fresh, repeats, look
    rec = scripted_run(monkeypatch, Scripted(lambda kind: next(times), cold=0.0), 0, warmup=1, reps=2)
    assert rec["status"] == "passed", rec["reason"]
    assert len([c for c in rec["calls"] if c["second_look"]]) == bench_plan.LOOKS



def gate_world(monkeypatch, seconds, stored_at=0):
    """The gate's plan of world 4 for f1x4 (an untimed shape: its warm-up, then its stored call and one fresh call in
    the order `stored_at` picks, then its repeat) on a scripted group whose calls take `seconds(name)`: the checks
    ci records, in order, as (name, status, reason), and the calls made."""
    from harness.judge import gate_plan
    monkeypatch.setattr(gate_plan.secrets, "randbelow", lambda n: stored_at)
    monkeypatch.setattr(gate_plan, "Group", lambda *a, **k: SimpleNamespace(info={}, close=lambda graceful: None))
    monkeypatch.setattr(gate_plan.Gate, "stored_case", lambda self, key: None)
    monkeypatch.setattr(gate_plan.Gate, "case", lambda self, t, key: None)
    called, added = [], []
    monkeypatch.setattr(gate_plan.Gate, "call", lambda self, group, name, t, world, case, first: called.append(
        name) or {"time_s": seconds(name), "status": "passed", "reason": None, "figures": None})
    args = SimpleNamespace(tiny=True, maps=False, report=None, fp32=None, release=False, fresh_calls=1)
    gate = gate_plan.Gate(args, SimpleNamespace(print=lambda *a, **k: None), lambda name, status, reason, *a, **k:
                          added.append((name, status, reason)))
    gate.run_, gate.buffers = SimpleNamespace(lock=None), None
    gate.world(SimpleNamespace(name="s"), 4, {1, 2}, gate.plan(["f1x4"], 4))
    return added, called


def test_a_seen_call_before_its_shapes_fresh_call_is_judged_by_it(monkeypatch):
    """A stored call that comes before its shape's fresh call waits for it: one quiet moment of a loaded machine that
    made it look fast beside a later slow second look no longer fails an honest solution (an honest baseline's f1x4
    failed so on a loaded two-core machine: 0.096 s against second looks of 0.21 s, its fresh call 0.14 s). A replay
    still fails, after a second look."""
    honest = {"fresh latents #1 x4": 1.0, "warm-up f1 x4": 0.5, "f1x4": 0.096, "fresh f1 x4": 0.14,
              "f1x4 repeat": 0.15}
    added, called = gate_world(monkeypatch, lambda name: honest.get(name, 0.21))
    assert not any("second look" in n for n in called), called
    assert [n for n, _, _ in added] == ["fresh latents #1 x4", "warm-up f1 x4", "fresh f1 x4", "f1x4",
                                        "f1x4 repeat"], added
    assert all(status == "passed" for _, status, _ in added), added
    replay = dict(honest, **{"f1x4": 0.01, "f1x4 repeat": 0.01})
    added, called = gate_world(monkeypatch, lambda name: replay.get(name, 0.14))
    added = {n: (s, r) for n, s, r in added}
    assert added["f1x4"][0] == "tampering" and "faster on repeated inputs" in added["f1x4"][1], added
    assert called.index("fresh f1 x4") < called.index("f1x4 second look #1") < called.index("f1x4 repeat"), called
