"""The judge/sandbox split and the unpredictable inputs against hostile solutions, through the real launcher on the
tiny geometry: each cheat of tests/cheats/ below fails for its reason under bench (which has no audit) and under ci
with the audit switched off, so the runtime layer holds alone. The reasons of the cheats run in batches are
tests/fixtures.py's (`bench`, `ci_runtime`)."""
import json
import os
import subprocess
import sys

import pytest

import fixtures
from fixtures import CHEAT, FIXTURES

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHEATS = os.path.join(ROOT, "tests", "cheats")


def bench_runs(run):
    """The cheats that bench fails in one of its runs (tests/fixtures.py: BESIDE, PROFILED, INPUTS), by name, in the
    index's order; each entry's `bench` is the workload's status and a phrase of the reason."""
    return {f.name: f for f in FIXTURES if f.kind == CHEAT and f.bench and f.bench.run == run}


EXPECTED = bench_runs(fixtures.BESIDE)          # on f5x1 beside the reference
PROFILE = bench_runs(fixtures.PROFILED)         # the same under --profile: cheats on its traces and its profiled call
INPUTS = bench_runs(fixtures.INPUTS)            # on f5x1 and f121x1: replays, a prediction, the census


@pytest.mark.slow      # 18 s for two cheats: the default tier's 4 minutes keep the other trust tests
@pytest.mark.parametrize("cheats", [tuple(INPUTS)], ids=["all"])
def test_bench_fails_every_cheat_on_the_inputs(tiny_data, tmp_path, cheats):
    """Timed calls get fresh latents, one at a secret position the stored ones, then the stored ones again: a
    replay is faster than the hardware allows or, slowed down to stay above that, than any fresh call; a
    prediction of the data is wrong."""
    out = tmp_path / "r.json"
    p = subprocess.run([sys.executable, "bench.py", "solutions/reference", *[os.path.join(CHEATS, c) for c in cheats],
                        "--tiny", "--workloads", "f5x1,f121x1", "--warmup", "0", "--min-reps", "2", "--max-reps",
                        "2", "--json", str(out)], cwd=ROOT, env=tiny_data, capture_output=True, text=True, timeout=600)
    report = json.loads(out.read_text())
    honest = report["solutions"]["reference"]["workloads"]["f121x1"]
    assert honest["passed"] and len(honest["repeat_s"]) == 2, p.stdout[-3000:]
    assert [c["inputs"] for c in honest["calls"]].count("stored") == 1 and len(honest["samples_s"]) == 2
    for cheat in cheats:
        status, phrase, workload, _ = INPUTS[cheat].bench
        rec = report["solutions"][cheat[:-3]]["workloads"][workload]
        assert rec["status"] == status and phrase in rec["reason"], (cheat, rec["status"], rec["reason"])


@pytest.mark.slow
def test_a_stored_clip_is_not_answered_from_another(tiny_data, tmp_path):
    """The stored clips are prefixes of one another: after f121's stored call, f17's stored call copies its first
    frames (bench: against a fresh call of f17's shape after it; the gate, which runs a world's longest stored clip
    first so that a longer one can never resume a shorter one's decode: against f17's fresh calls)."""
    cheat = os.path.join(CHEATS, "resumes_a_prefix.py")
    out = tmp_path / "r.json"
    p = subprocess.run([sys.executable, "bench.py", cheat, "--tiny", "--workloads", "f17x1,f121x1", "--warmup", "0",
                        "--min-reps", "2", "--max-reps", "2", "--json", str(out)], cwd=ROOT, env=tiny_data,
                       capture_output=True, text=True, timeout=600)
    report = json.loads(out.read_text())
    assert report["workloads"]["f121x1"]["passed"], p.stdout[-2000:]
    rec = report["workloads"]["f17x1"]
    from harness.judge.bench_plan import LOOKS       # the stored call looked too fast: a second look before the verdict
    kinds = [(c["inputs"], c["second_look"]) for c in rec["calls"]]
    assert kinds == [("stored", False), ("fresh", False)] + [("fresh", True)] * LOOKS, rec["calls"]
    assert rec["status"] == "tampering" and "faster on repeated inputs" in rec["reason"], (rec["status"], rec["reason"])
    out = tmp_path / "ci.json"
    p = subprocess.run([sys.executable, "ci.py", cheat, "--tiny", "--no-audit", "--workloads", "f17x1,f121x1",
                        "--fresh-calls", "1", "--json", str(out)], cwd=ROOT, env=tiny_data, capture_output=True,
                       text=True, timeout=600)
    names = [c["name"] for c in json.loads(out.read_text())["checks"]]
    fails = {c["name"]: c for c in json.loads(out.read_text())["checks"] if c["status"] not in ("passed", "skipped")}
    assert names.index("f121x1") < names.index("f17x1") if "f17x1" in names else True, names
    assert "f17x1" in fails and fails["f17x1"]["status"] == "tampering", (fails, p.stdout[-2000:])
    assert "faster on repeated inputs" in fails["f17x1"]["reason"] and p.returncode == 1, fails["f17x1"]


@pytest.mark.slow
def test_a_stored_call_with_no_bar_gets_a_second_look(tiny_data, tmp_path):
    """With --fresh-calls 1 a world's only fresh call of f5's shape is its process's first, never the bar: the gate's
    stored f5 call, answered from f121's stored video, is judged against a second look's fresh calls."""
    out = tmp_path / "ci.json"
    p = subprocess.run([sys.executable, "ci.py", os.path.join(CHEATS, "resumes_a_prefix.py"), "--tiny", "--no-audit",
                        "--workloads", "f121x1,f5x1", "--fresh-calls", "1", "--json", str(out)], cwd=ROOT,
                       env=tiny_data, capture_output=True, text=True, timeout=600)
    checks = {c["name"]: c for c in json.loads(out.read_text())["checks"]}
    assert checks["f5x1"]["status"] == "tampering", (checks["f5x1"], p.stdout[-2000:])
    assert "faster on repeated inputs" in checks["f5x1"]["reason"] and p.returncode == 1


@pytest.mark.slow
def test_work_in_the_kernel_that_outlasts_a_freeze_fails_its_group(tiny_data, tmp_path):
    """A thread looping in a long system call keeps working after the judge's freeze; the judge waits for the
    freeze to take hold (cgroup.FREEZE_S) and fails that group at its next call. The solution beside it passes."""
    from harness.isolation import cgroup
    probe = cgroup.Cgroup.make(f"wan-probe-{os.getpid()}-t")
    if probe is None:
        pytest.skip("no cgroup for the group here: the freeze is by signals")
    probe.remove()
    out = tmp_path / "r.json"
    p = subprocess.run([sys.executable, "bench.py", "solutions/reference", os.path.join(CHEATS, "stays_in_the_kernel.py"),
                        "--tiny", "--workloads", "f121x1", "--warmup", "0", "--min-reps", "2", "--max-reps", "2",
                        "--json", str(out)], cwd=ROOT, env=tiny_data, capture_output=True, text=True, timeout=600)
    report = json.loads(out.read_text())
    assert report["solutions"]["reference"]["workloads"]["f121x1"]["passed"], p.stdout[-2000:]
    rec = report["solutions"]["stays_in_the_kernel"]["workloads"]["f121x1"]
    assert rec["status"] == "tampering" and "did not all stop" in rec["reason"], (rec["status"], rec["reason"])


@pytest.mark.slow
def test_memory_spread_over_small_processes_fails_its_group(tiny_data, tmp_path):
    """tests/cheats/hoards_memory.py holds 1.5 GiB in six children of 256 MiB under a group cap of 1 GiB: the kernel
    ends one of its group's processes and the judge fails that group; the honest solution beside it, under the same
    cap, passes."""
    from harness.isolation import cgroup
    probe = cgroup.Cgroup.make(f"wan-probe-{os.getpid()}-m")
    if probe is not None:
        probe.remove()
    if probe is None or probe.memory_cap is None:
        pytest.skip("no memory cgroup for the group here")
    out = tmp_path / "r.json"
    p = subprocess.run([sys.executable, "bench.py", "solutions/reference", os.path.join(CHEATS, "hoards_memory.py"),
                        "--tiny", "--workloads", "f5x1", "--json", str(out)], cwd=ROOT,
                       env=dict(tiny_data, WAN_GROUP_MEMORY=str(1 << 30)), capture_output=True, text=True, timeout=600)
    report = json.loads(out.read_text())
    assert "memory at most 1 GiB)" in report["environment"]["isolation"], report["environment"]
    assert report["solutions"]["reference"]["workloads"]["f5x1"]["passed"], p.stdout[-2000:]
    rec = report["solutions"]["hoards_memory"]["workloads"]["f5x1"]
    assert rec["status"] == "crash" and "went past its memory cap of 1 GiB" in rec["reason"], (rec["status"],
                                                                                                rec["reason"])


@pytest.mark.slow
def test_a_replay_is_not_hidden_by_slowed_fresh_calls(tiny_data, tmp_path):
    """Bench's noise is the spread of the faster half of the fresh calls: two of five slowed eightfold do not widen
    it, so the replayed repeats stay too fast."""
    out = tmp_path / "r.json"
    p = subprocess.run([sys.executable, "bench.py", os.path.join(CHEATS, "replays_noisily.py"), "--tiny",
                        "--workloads", "f121x1", "--warmup", "0", "--min-reps", "5", "--max-reps", "5", "--json",
                        str(out)], cwd=ROOT, env=tiny_data, capture_output=True, text=True, timeout=600)
    rec = json.loads(out.read_text())["workloads"]["f121x1"]
    assert rec["status"] == "tampering" and "faster on repeated inputs" in rec["reason"], \
        (rec["status"], rec["reason"], p.stdout[-2000:])


@pytest.mark.slow
def test_gate_holds_every_call_to_the_rule_whatever_a_solution_knows(tiny_data, tmp_path):
    """tests/cheats/marks_by_pid.py carries bits of the stored latents from its group at world 1 to the one at world 2
    through the host's pid counter and is exact there only on the call they match: every fresh call is checked
    against the gate's fp32 decode with the task's allowance, so the others fail (each fresh call's checksum matches
    the three bits one time in eight: three calls all match one time in 512)."""
    out = tmp_path / "ci.json"
    p = subprocess.run([sys.executable, "ci.py", os.path.join(CHEATS, "marks_by_pid.py"), "--tiny", "--no-audit",
                        "--workloads", "f121x1,f121x2", "--fresh-calls", "3", "--json", str(out)], cwd=ROOT,
                       env=tiny_data, capture_output=True, text=True, timeout=600)
    checks = json.loads(out.read_text())["checks"]
    wrong = [c["name"] for c in checks if c["name"].startswith("fresh f121") and c["name"].endswith("x2")
             and c["status"] == "incorrect" and "rms(d)" in c["reason"]]
    assert wrong and p.returncode == 1, p.stdout[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("cheat", [c for c, f in INPUTS.items() if f.ci_runtime])
def test_gate_without_audit_fails_the_cheats_on_the_inputs(tiny_data, tmp_path, cheat):
    """The gate's own checks of the inputs: a stored call and its repeat against the fresh ones, the second look
    verified in full, fresh draws (the replays' other forms and the census at a group's start: bench's run of every
    cheat above, through the same judge)."""
    code, check, status, phrase = INPUTS[cheat].ci_runtime
    out = tmp_path / "ci.json"
    p = subprocess.run([sys.executable, "ci.py", os.path.join(CHEATS, cheat), "--tiny", "--no-audit", "--workloads",
                        "f5x1,f121x1", "--fresh-calls", "1", "--json", str(out)], cwd=ROOT, env=tiny_data,
                       capture_output=True, text=True, timeout=600)
    report = json.loads(out.read_text())
    fails = {c["name"]: c for c in report["checks"] if c["status"] not in ("passed", "skipped")}
    assert check in fails, (fails, p.stdout[-2000:])
    assert fails[check]["status"] == status and phrase in fails[check]["reason"], fails[check]
    assert p.returncode == code


@pytest.mark.slow
def test_skipping_work_after_the_first_calls_is_incorrect(tiny_data, tmp_path):
    """Honest on a process's first calls, cheap later: every call's whole video is checked, fresh ones too."""
    out = tmp_path / "r.json"
    subprocess.run([sys.executable, "bench.py", os.path.join(CHEATS, "cheap_after_warmup.py"), "--tiny",
                    "--workloads", "f121x1", "--min-reps", "6", "--max-reps", "6", "--json", str(out)], cwd=ROOT,
                   env=tiny_data, capture_output=True, text=True, timeout=600)
    rec = json.loads(out.read_text())["workloads"]["f121x1"]
    assert rec["status"] == "incorrect" and "max|d|" in rec["reason"], rec


DEFAULT = tuple(c for c, f in EXPECTED.items() if f.tier == fixtures.DEFAULT)      # the default tier's run


@pytest.mark.slow
def test_a_full_command_pipe_cannot_hang_the_judge(tiny_data, tmp_path):
    """As root (the judge's user: WAN_ASSUME_NO_USERS) tests/cheats/fills_its_commands.py reopens its command pipe
    for writing and fills it; the judge's write of `go` has a deadline, and the rank fails for it."""
    out = tmp_path / "r.json"
    p = subprocess.run([sys.executable, "bench.py", os.path.join(CHEATS, "fills_its_commands.py"), "--tiny",
                        "--workloads", "f1x1", "--json", str(out)], cwd=ROOT,
                       env=dict(tiny_data, WAN_ASSUME_NO_USERS="1"), capture_output=True, text=True, timeout=600)
    rec = json.loads(out.read_text())["workloads"]["f1x1"]
    assert rec["status"] == "tampering" and "rank 0 did not read its commands for 5 s" in rec["reason"], \
        (rec, p.stdout[-2000:])


@pytest.mark.parametrize("cheats", [DEFAULT, pytest.param(tuple(EXPECTED), marks=pytest.mark.slow)],
                         ids=["some", "all"])
def test_bench_fails_every_cheat_for_its_reason(tiny_data, tmp_path, cheats):
    """In one bench run (interleaved call by call), beside an honest solution that must still pass."""
    out = tmp_path / "r.json"
    p = subprocess.run([sys.executable, "bench.py", "solutions/reference", *[os.path.join(CHEATS, c) for c in cheats],
                        "--tiny", "--workloads", "f5x1", "--json", str(out)], cwd=ROOT, env=tiny_data,
                       capture_output=True, text=True, timeout=600)
    report = json.loads(out.read_text())
    assert report["environment"]["isolation"].startswith("landlock"), report["environment"]
    assert report["solutions"]["reference"]["workloads"]["f5x1"]["passed"], p.stdout[-3000:]
    for cheat in cheats:
        status, phrase, *_ = EXPECTED[cheat].bench
        rec = report["solutions"][cheat[:-3]]["workloads"]["f5x1"]
        assert rec["status"] == status and phrase in rec["reason"], (cheat, rec["status"], rec["reason"])
    assert p.returncode == 1
    assert not os.path.exists(os.path.join(ROOT, "planted.py")) and not os.path.exists("/tmp/wan-cheat-cache")
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert "time.sleep(300)" not in ps


# The gate's share of EXPECTED (the entries with a `ci_runtime` verdict): one judge (harness/judge/group.py) runs
# bench's calls and the gate's, and bench's run of every cheat shows each defence; these show the gate reporting them,
# one cheat per layer of the judge (the protocol, out, the filesystem lock, the decoys, processes, the disk, forged
# statuses, the weights, the command pipe, the filter).
GATE = tuple(c for c, f in EXPECTED.items() if f.ci_runtime)


@pytest.mark.slow
@pytest.mark.parametrize("cheat", GATE)
def test_gate_without_audit_fails_a_cheat_per_layer(tiny_data, tmp_path, cheat):
    code, _, status, phrase = EXPECTED[cheat].ci_runtime       # the first check that fails
    out = tmp_path / "ci.json"
    p = subprocess.run([sys.executable, "ci.py", os.path.join(CHEATS, cheat), "--tiny", "--no-audit", "--workloads",
                        "f5x1", "--fresh-calls", "1", "--json", str(out)], cwd=ROOT, env=tiny_data,
                       capture_output=True, text=True, timeout=600)
    report = json.loads(out.read_text())
    failed = [c for c in report["checks"] if c["status"] not in ("passed", "skipped")]
    assert failed and failed[0]["status"] == status and phrase in failed[0]["reason"], (failed, p.stdout[-2000:])
    assert p.returncode == code


@pytest.mark.slow
def test_the_judge_outlasts_a_flood_of_lines(tiny_data, tmp_path):
    """What a rank does to the pipes between it and the judge is the solution's failure, never the judge's memory:
    lines the judge did not ask for fail past a bound, before they fill it (EXPECTED has the command pipe kept full
    or closed)."""
    cases = [("floods_the_judge.py", "f121x2", [], "bytes the judge had not read")]
    for cheat, workload, extra, phrase in cases:
        out = tmp_path / f"{cheat}.json"
        p = subprocess.run([sys.executable, "bench.py", os.path.join(CHEATS, cheat), "--tiny", "--workloads",
                            workload, *extra, "--json", str(out)], cwd=ROOT, env=tiny_data, capture_output=True,
                           text=True, timeout=300)
        rec = json.loads(out.read_text())["workloads"][workload]
        assert rec["status"] == "tampering" and phrase in rec["reason"], (cheat, rec, p.stdout[-2000:])


def test_leaves_nothing_behind(tiny_data, tmp_path):
    """A detached helper (double fork, new session) is still the judge's to kill; the run's folder is gone."""
    sol = tmp_path / "detaches.py"
    sol.write_text('''"""Leaves a daemon behind: double fork and setsid."""
import os
import time

import reference


def run(z, weights, rank, world, pg, out):
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(120)
        os._exit(0)
    os.wait()
    reference.run(z, weights, rank, world, pg, out)
''')
    tmpdir = tmp_path / "tmp"      # the run's folder goes here, and its ranks' command lines name it
    tmpdir.mkdir()
    out = tmp_path / "r.json"
    p = subprocess.run([sys.executable, "bench.py", str(sol), "--tiny", "--workloads", "f1x1", "--json", str(out)],
                       cwd=ROOT, env=dict(tiny_data, TMPDIR=str(tmpdir)), capture_output=True, text=True, timeout=300)
    rec = json.loads(out.read_text())["workloads"]["f1x1"]
    assert rec["status"] == "tampering" and "processes left running" in rec["reason"], (rec, p.stdout[-2000:])
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert not [line for line in ps.splitlines() if "harness.rank" in line and f" {tmpdir}/" in line], ps
    assert not [n for n in os.listdir(tmpdir) if n.startswith("wan-run-")]


@pytest.mark.slow
def test_no_state_survives_in_system_v_ipc(tiny_data, tmp_path):
    """keeps_state_in_sysv.py raises once a process finds another's System V segment: the ranks of a group each have
    an IPC namespace of their own (f1x4), and what a group made is removed when it closes (two runs without
    isolation, where the ranks share the host's namespace as on GPUs)."""
    cheat = os.path.join(CHEATS, "keeps_state_in_sysv.py")
    from harness.isolation import ipc
    before = ipc.snapshot()
    for args in (("--workloads", "f1x1,f1x4"), ("--workloads", "f1x1", "--no-isolation"),
                 ("--workloads", "f1x1", "--no-isolation")):
        out = tmp_path / "r.json"
        p = subprocess.run([sys.executable, "bench.py", cheat, "--tiny", *args, "--json", str(out)], cwd=ROOT,
                           env=tiny_data, capture_output=True, text=True, timeout=300)
        recs = json.loads(out.read_text())["workloads"]
        assert all(r["status"] == "passed" for r in recs.values()), (args, p.stdout[-2000:])
    assert ipc.snapshot() <= before


@pytest.mark.slow
def test_no_state_survives_in_kernel_state_outside_the_filesystem(tiny_data, tmp_path):
    """keeps_state_in_kernel.py raises once a process finds another's mark in an extended attribute, a keyring or the
    domain name: two runs, the second of two worlds, leave none that a later process can find."""
    cheat = tmp_path / "keeps_state_in_kernel.py"        # a copy: its extended attributes are this test's
    cheat.write_text(open(os.path.join(CHEATS, "keeps_state_in_kernel.py")).read())
    for workloads in ("f1x1", "f1x1,f1x4"):
        out = tmp_path / "r.json"
        p = subprocess.run([sys.executable, "bench.py", str(cheat), "--tiny", "--workloads", workloads, "--json",
                            str(out)], cwd=ROOT, env=tiny_data, capture_output=True, text=True, timeout=300)
        recs = json.loads(out.read_text())["workloads"]
        assert all(r["status"] == "passed" for r in recs.values()), (workloads, p.stdout[-2000:])
    assert not os.listxattr(cheat)


@pytest.mark.slow      # 18 s: the default tier keeps test_profile's honest trace and the copy's unit test
def test_profile_takes_only_the_trace_the_judge_placed(tiny_data, tmp_path):
    """--profile copies each rank's trace from the one place the judge chose in its scratch folder, a regular file
    there and capped: a report naming /dev/zero, a link to it or a FIFO in that place fail the solution, at once."""
    out, prof = tmp_path / "r.json", tmp_path / "prof"
    p = subprocess.run([sys.executable, "bench.py", "solutions/reference", *[os.path.join(CHEATS, c) for c in PROFILE],
                        "--tiny", "--workloads", "f5x1", "--profile", str(prof), "--json", str(out)], cwd=ROOT,
                       env=tiny_data, capture_output=True, text=True, timeout=300)
    report = json.loads(out.read_text())
    honest = report["solutions"]["reference"]["workloads"]["f5x1"]
    assert honest["passed"] and honest["profile"]["ranks"], p.stdout[-3000:]
    for cheat, f in PROFILE.items():
        status, phrase, *_ = f.bench
        rec = report["solutions"][cheat[:-3]]["workloads"]["f5x1"]
        assert rec["status"] == status and not rec["passed"] and phrase in rec["reason"], (cheat, rec)
    assert sorted(os.listdir(prof)) == ["reference-f5x1-rank0.json", "reference-f5x1-scopes.json"]
    assert p.returncode == 1
