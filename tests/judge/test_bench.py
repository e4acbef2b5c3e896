"""bench.py on the tiny geometry through gloo: the reference passes every workload, and broken solutions are
each reported with the right status, none hanging, no process left behind."""
import ctypes
import json
import math
import os
import subprocess
import sys

import pytest

import fixtures
import spec
from fixtures import FIXTURES

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BROKEN = os.path.join(ROOT, "tests", "broken")


def bench(env, *args, timeout=600):
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bench.py"), "--tiny", *args], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=timeout)
    return p


def ranks(tmpdir):
    """The rank processes (and whatever they forked) of runs whose folder is under `tmpdir`: a rank's command line
    names its run's folder, which bench makes under its TMPDIR, so other runs on the machine are not counted."""
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if "-m harness.rank" in line and f" {tmpdir}/" in line}


@pytest.fixture
def run_tmp(tmp_path):
    """A TMPDIR for the test's bench runs, and a function listing their rank processes still alive."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    return str(folder), lambda: ranks(folder)


# The broken solutions and what bench must report of each: tests/fixtures.py's `bench` verdicts of its runs ALONE.
# The default tier keeps one of each kind of failure (the 4-minute budget); the rest run in the slow tier.
@pytest.mark.parametrize("solution, workload, status, reason", [
    pytest.param(f.name, f.bench.workload, f.bench.status, f.bench.phrase,
                 marks=() if f.tier == fixtures.DEFAULT else pytest.mark.slow)
    for f in FIXTURES if f.kind == fixtures.BROKEN and f.bench and f.bench.run == fixtures.ALONE])
def test_broken_solutions_are_reported(tiny_data, tmp_path, solution, workload, status, reason, run_tmp):
    out = tmp_path / "r.json"
    tmpdir, leftover_workers = run_tmp
    env = dict(tiny_data, WAN_BUILD_DIR=str(tmp_path / "build"), TMPDIR=tmpdir)
    p = bench(env, os.path.join(BROKEN, solution), "--workloads", f"{workload},f1x1", "--json", str(out),
              "--timeout-scale", "0.01" if solution == "hangs.py" else "0.03", timeout=300)
    assert p.returncode == 1, p.stdout + p.stderr
    report = json.loads(out.read_text())
    assert report["schema_version"] == 1
    rec = report["workloads"][workload]
    assert rec["status"] == status and not rec["passed"], rec
    assert reason in rec["reason"], rec["reason"]
    assert "[/]" not in reason or reason in p.stdout          # the console prints markup and controls as text
    assert "\x1b" not in p.stdout and "\r" not in p.stdout
    assert not leftover_workers()


def test_reference_passes_short_workloads_and_checks_every_call(tiny_data, tmp_path):
    out = tmp_path / "r.json"
    p = bench(tiny_data, "solutions/reference", "--workloads", "f1x1,f5x4,f17x1", "--json", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    report = json.loads(out.read_text())
    for w in ("f1x1", "f5x4", "f17x1"):
        rec = report["workloads"][w]
        assert rec["passed"] and rec["status"] == "passed" and not rec["timed"] and rec["median_s"] is None
        assert rec["psnr_db"] > 20 and rec["max_abs"] <= rec["allowance"]["max_abs"]
        assert all(c["figures"] for c in rec["calls"])
    assert report["objective_s"] is None and not report["objective_complete"]
    assert "tiny geometry on the CPU" in p.stdout
    env = report["environment"]
    git = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    if git.returncode == 0:   # what ran is named: the commit, and the tracked files changed since
        changed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                                 capture_output=True, text=True).stdout.splitlines()
        assert env["commit"] == git.stdout.strip() and env["changed_since_commit"] == [c[3:] for c in changed]


@pytest.mark.slow
def test_reference_at_every_world(tiny_data, tmp_path):
    """Untimed and timed workloads at worlds 1, 2 and 4 (gloo) pass, the timed ones timed, the objective their
    geomean, partial (the objective's completeness: test_stats_and_objective; f241 and f481 run in no CPU test, their
    calls the same judge's at longer clips)."""
    out = tmp_path / "r.json"
    p = bench(tiny_data, "solutions/reference", "--workloads", "f1x1,f5x4,f121x1,f121x2,f121x4", "--json", str(out),
              "--warmup", "0", "--min-reps", "3", "--max-reps", "3", timeout=1200)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    report = json.loads(out.read_text())
    assert set(report["workloads"]) == {"f1x1", "f5x4", "f121x1", "f121x2", "f121x4"}
    assert all(r["passed"] for r in report["workloads"].values())
    timed = [r for r in report["workloads"].values() if r["timed"]]
    assert len(timed) == 3 and all(r["n"] == 3 and len(r["samples_s"]) == r["n"] for r in timed)
    geo = math.exp(sum(math.log(r["median_s"]) for r in timed) / len(timed))
    assert report["objective_s"] == pytest.approx(geo, rel=1e-12) and not report["objective_complete"]
    for r in timed:
        s = sorted(r["samples_s"])
        n = len(s)
        assert r["median_s"] == pytest.approx(s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2)


@pytest.mark.slow      # the default tier's test_trust runs the reference beside cheats in one run
def test_two_solutions_interleaved_with_a_verdict(tiny_data, tmp_path):
    out = tmp_path / "r.json"
    p = bench(tiny_data, "solutions/reference", os.path.join(BROKEN, "nan.py"), "--workloads", "f5x1",
              "--json", str(out))
    report = json.loads(out.read_text())
    assert report["solutions"]["reference"]["workloads"]["f5x1"]["passed"]
    assert report["solutions"]["nan"]["workloads"]["f5x1"]["status"] == "incorrect"
    assert p.returncode == 1


@pytest.mark.slow      # 21 s
def test_at_once_runs_the_solutions_in_waves(tiny_data, tmp_path):
    """--at-once 1: each solution's whole plan in turn, its group alone (on GPUs: the whole cap its own), every
    solution judged as when interleaved."""
    out = tmp_path / "r.json"
    p = bench(tiny_data, "solutions/reference", os.path.join(BROKEN, "nan.py"), "--workloads", "f1x1",
              "--at-once", "1", "--json", str(out))
    report = json.loads(out.read_text())
    assert report["solutions"]["reference"]["workloads"]["f1x1"]["passed"], p.stdout[-3000:]
    assert report["solutions"]["nan"]["workloads"]["f1x1"]["status"] == "incorrect"
    assert report["method"]["at_once"] == 1 and p.returncode == 1
    assert "bench reference (wave 1 of 2: at most 1 solutions at once)" in p.stdout
    assert "bench nan (wave 2 of 2: at most 1 solutions at once)" in p.stdout


@pytest.mark.slow      # 25 s
def test_one_solution_twice_runs_as_two(tiny_data, tmp_path):
    """An A/A run (the noise between two runs of one solution): each entry has its own ranks, so the first's
    failure, which closes its group, leaves the second its own verdict."""
    out = tmp_path / "r.json"
    p = bench(tiny_data, os.path.join(BROKEN, "crashes.py"), os.path.join(BROKEN, "crashes.py"), "--workloads",
              "f1x1,f5x1", "--json", str(out))
    report = json.loads(out.read_text())
    assert set(report["solutions"]) == {"crashes", "crashes#1"}, p.stdout[-2000:]
    for name in ("crashes", "crashes#1"):
        assert {w["status"] for w in report["solutions"][name]["workloads"].values()} == {"crash"}, report
    assert p.returncode == 1


def test_compare_times_knows_the_noise():
    from harness.judge import checks
    a = {"median_s": 1.0, "se_median_s": 0.002}
    assert checks.compare_times(a, {"median_s": 1.003, "se_median_s": 0.002})[1] == "same within noise"
    assert checks.compare_times(a, {"median_s": 1.2, "se_median_s": 0.002})[1] == "faster"
    assert checks.compare_times(a, {"median_s": 0.8, "se_median_s": 0.002})[1] == "slower"
    assert checks.compare_times(a, {"median_s": 1.05, "se_median_s": 0.05})[1] == "same within noise"


def test_stats_and_objective():
    from harness.judge import checks
    s = checks.stats([3.0, 1.0, 2.0, 10.0])
    assert s["median_s"] == 2.5 and s["min_s"] == 1.0 and s["max_s"] == 10.0 and s["n"] == 4
    recs = {w: {"median_s": 2.0} for w in spec.TIMED_WORKLOADS}
    value, complete, n = checks.objective(recs, spec.TIMED_WORKLOADS)
    assert value == pytest.approx(2.0) and complete and n == len(spec.TIMED_WORKLOADS)
    recs["f481x4"] = {"median_s": None}
    assert checks.objective(recs, spec.TIMED_WORKLOADS)[1] is False


def test_counts_and_limits_out_of_range_are_refused(capsys):
    """A run with no timed call (--min-reps 0 crashed the plan), a negative warm-up, fewer reps at most than at least,
    or a cap that is not positive: one clear error naming the option."""
    import bench
    for argv, phrase in ((["--min-reps", "0"], "--min-reps must be at least 1"),
                         (["--warmup", "-1"], "--warmup must be at least 0"),
                         (["--min-reps", "4", "--max-reps", "3"], "--max-reps must be at least 4"),
                         (["--time-cap", "nan"], "must be positive")):
        with pytest.raises(SystemExit):
            bench.parse_args(["solutions/reference", *argv])
        assert phrase in capsys.readouterr().err
    assert bench.parse_args(["solutions/reference", "--warmup", "0", "--min-reps", "1"]).min_reps == 1


def test_worst_status_wins_and_keeps_every_reason():
    from harness.judge import checks
    assert checks.worst([]) == ("passed", None)
    status, reason = checks.worst([("incorrect", "a"), ("tampering", "b"), ("impossible", "c")])
    assert status == "tampering" and reason == "a; b; c"


@pytest.mark.slow
def test_runs_under_torchrun(tiny_data, tmp_path, run_tmp):
    """The same command under torchrun's launcher: its rank 0 runs the whole bench (it judges ranks of its own), the
    other launched processes wait and exit."""
    out = tmp_path / "r.json"
    tmpdir, leftover_workers = run_tmp
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "4",
                        os.path.join(ROOT, "bench.py"), "solutions/reference", "--tiny", "--workloads", "f5x4,f5x1",
                        "--json", str(out)], cwd=ROOT, env=dict(tiny_data, OMP_NUM_THREADS="1", TMPDIR=tmpdir),
                       capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["workloads"]["f5x4"]["passed"] and report["workloads"]["f5x1"]["passed"]
    assert not leftover_workers()


class _Loopback:
    """A stand-in for socket.socket whose bind fails (EADDRINUSE) where `refuses(address, reuse)` says so: a loopback
    whose ephemeral ports an earlier solution put in TIME_WAIT, without exhausting the machine's."""
    def __init__(self, refuses):
        self.refuses = refuses

    def __call__(self, *args):
        import errno
        refuses = self.refuses

        class Sock:
            reuse = False

            def setsockopt(self, level, name, value):
                self.reuse = bool(value)

            def bind(self, address):
                if refuses(address[0], self.reuse):
                    raise OSError(errno.EADDRINUSE, "Address already in use")
                self.address = address

            def getsockname(self):
                return self.address[0], 40000

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False
        return Sock()


def test_free_port_falls_back_to_other_loopback_addresses(monkeypatch):
    """127.0.0.1 exhausted, even with SO_REUSEADDR: another address of 127/8, and MASTER_ADDR names it."""
    import types

    from harness.judge import group, rank_env
    fake = types.SimpleNamespace(socket=_Loopback(lambda addr, reuse: addr in ("127.0.0.1", "")),
                                 SOL_SOCKET=1, SO_REUSEADDR=2)
    monkeypatch.setattr(rank_env, "socket", fake)
    addr, port = group._free_port()
    assert addr.startswith("127.") and addr != "127.0.0.1" and port == 40000
    assert rank_env.rank_env(0, 1, port, "/s", True, "/d", "/b", "/p", addr)["MASTER_ADDR"] == addr
    fake.socket = _Loopback(lambda addr, reuse: not reuse)     # ports in TIME_WAIT: SO_REUSEADDR binds them
    assert group._free_port() == ("127.0.0.1", 40000)
    monkeypatch.setattr(group.Group, "ports", {40000})          # a live group's port names its processes
    with pytest.raises(group.GroupFailed):
        group._free_port()


def test_no_free_port_fails_the_group_and_names_an_earlier_solution(monkeypatch):
    import types

    from harness.judge import group, rank_env
    monkeypatch.setattr(rank_env, "socket", types.SimpleNamespace(socket=_Loopback(lambda addr, reuse: True),
                                                             SOL_SOCKET=1, SO_REUSEADDR=2))
    monkeypatch.setattr(group.Group, "spawned", 0)
    with pytest.raises(group.GroupFailed) as e:
        group._free_port()
    assert e.value.status == "harness error" and "no free TCP port" in e.value.message
    assert "earlier solution" not in e.value.message
    monkeypatch.setattr(group.Group, "spawned", 2)
    with pytest.raises(group.GroupFailed, match="an earlier solution's ranks may have exhausted them"):
        group._free_port()


def _private_network():
    """Whether this process may run a command in a network namespace of its own (root, unshare, ip)."""
    try:
        return subprocess.run(["unshare", "-n", "sh", "-c", "ip link set lo up"], capture_output=True,
                              timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.mark.slow
@pytest.mark.skipif(not _private_network(), reason="needs `unshare -n` (root) and `ip`")
def test_exhausted_ports_do_not_crash_bench(tiny_data, tmp_path):
    """The real attack, in a network namespace of its own with 150 ephemeral ports: exhausts_ports.py spends them all
    in prepare; bench still writes its report, the cheat's record and a record for the solution after it."""
    out = tmp_path / "r.json"
    cmd = (f"ip link set lo up && sysctl -qw net.ipv4.ip_local_port_range='40000 40150' && "
           f"{sys.executable} bench.py {os.path.join(ROOT, 'tests', 'cheats', 'exhausts_ports.py')} "
           f"solutions/reference --tiny --workloads f5x1 --json {out}")
    p = subprocess.run(["unshare", "-n", "sh", "-c", cmd], cwd=ROOT, env=tiny_data, capture_output=True, text=True,
                       timeout=600)
    assert "Traceback" not in p.stderr and p.returncode in (0, 1), p.stdout[-2000:] + p.stderr[-3000:]
    recs = {n: s["workloads"]["f5x1"] for n, s in json.loads(out.read_text())["solutions"].items()}
    assert recs["exhausts_ports"]["status"] == "passed", recs
    honest = recs["reference"]
    assert honest["passed"] or "exhausted the loopback's ports" in honest["reason"], honest


JUDGE_WITH_A_HELPER = """import multiprocessing as mp, sys, time
sys.path.insert(0, {root!r})
import bench
from harness.isolation import procs
if {marked}:
    procs.mark_judge()
helper = mp.get_context("spawn").Process(target=time.sleep, args=(300,), daemon=True)
helper.start()       # as the data maker's workers and multiprocessing's resource tracker are, on first use
try:
    code = bench.main(sys.argv[1:])
finally:
    helper.kill()
sys.exit(code)
"""


@pytest.mark.slow
def test_the_judges_own_helpers_are_not_the_solutions(tiny_data, tmp_path):
    """A process the judge started itself, after bench marked it, is not one the solution left running. An unmarked
    one (as a rank's orphan that cleared its environment would be) is no group's where each group has a cgroup (a
    process is a group's by its cgroup and parentage only), and counted where there is none."""
    for marked in (True, False):
        out = tmp_path / f"r{marked}.json"
        p = subprocess.run([sys.executable, "-c", JUDGE_WITH_A_HELPER.format(root=ROOT, marked=marked),
                            "solutions/reference", "--tiny", "--workloads", "f1x1", "--json", str(out)], cwd=ROOT,
                           env=tiny_data, capture_output=True, text=True, timeout=300)
        rec = json.loads(out.read_text())["workloads"]["f1x1"]
        cgroups = "a cgroup per group" in json.loads(out.read_text())["environment"]["isolation"]
        if marked or cgroups:       # with cgroups a process is a group's by its cgroup only: this one is no group's
            assert p.returncode == 0 and rec["passed"], (rec["status"], rec["reason"], p.stderr[-2000:])
        else:
            assert rec["status"] == "tampering" and "processes left running" in rec["reason"], rec


@pytest.mark.slow
def test_the_build_runs_locked_down_and_leaves_nothing(tiny_data, tmp_path, run_tmp):
    """A solution's code runs at build time (a global constructor in its extension, which the build loads): there it
    finds neither the judge's environment nor the data or the repository, holds no capability, may not touch the
    judge's limits, leaves no System V segment in the host's IPC namespace, and the helper it starts is gone when
    the build is; without isolation the repository is readable and the limits open (what the confinement takes
    away)."""
    cheat = os.path.join(ROOT, "tests", "cheats", "escapes_at_build")
    for isolated in (True, False):
        # The default build folder (under HOME) where the data set's own env names none, a given one elsewhere.
        build = tmp_path / "home" / ".cache" / "wan-vae-decode" / "build" if isolated else tmp_path / "build"
        env = {k: v for k, v in tiny_data.items() if k != "WAN_BUILD_DIR"}
        env.update(HOME=str(tmp_path / "home"), TMPDIR=run_tmp[0])
        if not isolated:
            env["WAN_BUILD_DIR"] = str(build)
        p = bench(env, cheat, "--workloads", "f1x1", *([] if isolated else ["--no-isolation"]), timeout=900)
        found = dict(line.split(" ", 1) for line in next(build.glob("*/escape.txt")).read_text().splitlines())
        ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
        assert "sleep 299" not in ps, p.stdout[-2000:]
        assert found["mark"] == "none" and found["data-env"] == "none", found
        left = _sysv_segment(MARK_KEY)
        if left is not None:        # not the judge's to remove without isolation; the test's own leftover
            ctypes.CDLL(None).shmctl(left, 0, None)
        if isolated:
            assert found["judge-environ"] == "denied" and found["repository"] == "denied", found
            assert found["judge-limits"] == "refused" and int(found["capabilities"], 16) == 0, found
            assert found["seccomp"] == "2" and found["sysv"] == "made" and left is None, (found, left)
            assert p.returncode == 0, p.stdout[-3000:]
        else:
            assert found["repository"] == "read" and found["judge-limits"] == "changed", found
            assert left is not None, "the segment made without isolation is in the host's namespace"


MARK_KEY = 0x57414E42       # escape.cpp's segment


def _sysv_segment(key):
    """The id of the host's System V segment with this key, or None."""
    with open("/proc/sysvipc/shm") as f:
        for line in f.read().splitlines()[1:]:
            if line.split() and int(line.split()[0]) == key:
                return int(line.split()[1])
    return None


def test_peaks_a_rank_gives_on_some_calls_only_are_summed_up_without_a_crash():
    """A report's peak is typed alone (a count, or none): a rank's largest given peak is its record's, and a rank
    that gave none leaves the record without one."""
    from types import SimpleNamespace
    from harness.judge.bench_plan import BenchPlan
    runner = SimpleNamespace(geometry=spec.TINY, cpu=True, args=SimpleNamespace(gpu_key=None))

    def summed(*peaks):
        rec = {"calls": [{"peak_bytes": p} for p in peaks], "timed": False, "passed": True, "samples_s": []}
        BenchPlan.summarise(runner, rec)
        return rec.get("peak_bytes")
    assert summed([1, 5], [None, 7], [3, None]) == [3, 7]
    assert summed([1, 5], [None, None]) == [1, 5]
    assert summed([None, 5], [None, 6]) is None and summed() is None


@pytest.mark.slow      # with test_ci's forges_the_console, the slow tier's
def test_a_solutions_lines_never_start_where_the_judges_do(tiny_data, tmp_path):
    """A message of many lines (a PASS of its own, a failure blamed on the solution beside it): on the console each
    line after its first is indented behind console.QUOTE."""
    from harness.report.console import QUOTE
    cheat = os.path.join(ROOT, "tests", "cheats", "forges_the_console.py")
    p = bench(tiny_data, "solutions/reference", cheat, "--workloads", "f1x1", "--json", str(tmp_path / "r.json"),
              timeout=300)
    rec = json.loads((tmp_path / "r.json").read_text())["solutions"]["forges_the_console"]["workloads"]["f1x1"]
    assert rec["status"] == "runtime error" and "(forged)" in rec["reason"], rec
    forged = [line for line in p.stdout.splitlines() if "(forged)" in line]
    assert forged and all(line.startswith(QUOTE[1:]) for line in forged), forged


def test_a_solution_that_cannot_be_described_fails_alone(tiny_data, tmp_path):
    """A malformed solution.yml (tests/cheats/mixes_manifest_keys: a key that is not text) is that solution's load
    error; the solution beside it still runs and passes, and the JSON holds both (bench used to stop at the first)."""
    out = tmp_path / "r.json"
    p = bench(tiny_data, os.path.join(ROOT, "tests", "cheats", "mixes_manifest_keys"), "solutions/reference",
              "--workloads", "f1x1", "--json", str(out))
    report = json.loads(out.read_text())
    bad = report["solutions"]["mixes_manifest_keys"]["workloads"]["f1x1"]
    assert bad["status"] == "load error" and "solution.yml" in bad["reason"], bad
    assert report["solutions"]["reference"]["workloads"]["f1x1"]["passed"], p.stdout[-2000:]
    assert p.returncode == 1, p.stdout[-2000:]


def test_solution_names_stay_unique():
    """A folder named like bench's second name for another (`reference#2`) does not take its place in the report."""
    sys.path.insert(0, ROOT)
    import bench
    taken = [{"name": "reference"}, {"name": "reference#2"}]
    assert bench._unique("reference", taken) == "reference#3"
    assert bench._unique("other", taken) == "other"
