"""The runtime defences on a CUDA GPU (`python -m pytest -m gpu`): the cheats that tests/trust/test_trust.py runs on the
CPU's tiny geometry, here through bench at world 1 on the full geometry, each beside the reference, which must still
pass. Each fails for the reason it fails on the CPU: on a GPU the rank also holds CUDA (the judge's lent buffers, the
driver's hold between calls), and none of that may open a way round the lock."""
import json
import os
import subprocess
import sys

import pytest
import torch

import fixtures
from fixtures import CHEAT, FIXTURES

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHEATS = os.path.join(ROOT, "tests", "cheats")

pytestmark = pytest.mark.gpu
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

# Every group of a bench run stays alive (frozen, its CUDA held) while the others run, each with a CUDA context and
# what its caching allocator keeps: a few at a time leave the judge its share of the GPU
# (harness/isolation/gpu_memory.py).
BATCH = 9
# What bench must report of each cheat (tests/fixtures.py): test_trust's runs of the cheats beside the reference,
# under --profile and on the inputs. Where a GPU fails a cheat for another reason than the CPU, `gpu` says it: the
# driver refuses to hold a process whose first thread has ended (the hold comes before the count of sockets); the two
# cheats on the CPU's buffer files (a memory file, its mapping's tail) find no file on a GPU and fail on their own.
GPU_EXPECTED = {f.name: f.gpu or f.bench for f in FIXTURES
                if f.kind == CHEAT and f.bench and f.bench.run == fixtures.BESIDE}
PROFILE = {f.name: f.bench for f in FIXTURES if f.kind == CHEAT and f.bench and f.bench.run == fixtures.PROFILED}
INPUTS = {f.name: f.bench for f in FIXTURES if f.kind == CHEAT and f.bench and f.bench.run == fixtures.INPUTS}
RUNTIME = sorted(GPU_EXPECTED)
BATCHES = [tuple(RUNTIME[i:i + BATCH]) for i in range(0, len(RUNTIME), BATCH)]
# The cheats on the inputs: those of a group's start and of a prediction of fresh latents on f5x1; the replays on
# f121x1, whose timed calls repeat the stored latents (with the GPU's time per frame a replay is below the roofline
# floor or faster than the fresh calls, whichever its sleep makes it).
CENSUS = tuple(c for c, bench in sorted(INPUTS.items()) if bench.workload == "f5x1")
REPLAYS = tuple(c for c, bench in sorted(INPUTS.items()) if bench.workload == "f121x1")
REPLAYED = (("impossible", "below the roofline floor"), ("tampering", "faster on repeated inputs"),
            ("incorrect", "max|d|"))


def _bench(tmp_path, cheats, workloads, *extra):
    out = tmp_path / "r.json"
    p = subprocess.run([sys.executable, "bench.py", "solutions/reference", *[os.path.join(CHEATS, c) for c in cheats],
                        "--workloads", workloads, "--json", str(out), *extra], cwd=ROOT, capture_output=True,
                       text=True, timeout=1200)
    assert out.exists(), (p.returncode, p.stdout[-3000:], p.stderr[-3000:])
    report = json.loads(out.read_text())
    assert report["environment"]["isolation"].startswith("landlock"), report["environment"]
    for w in workloads.split(","):
        assert report["solutions"]["reference"]["workloads"][w]["passed"], (w, p.stdout[-3000:])
    return report


def _verdicts(report, cheats, workload):
    return {c: (report["solutions"][c[:-3]]["workloads"][workload]["status"],
                report["solutions"][c[:-3]]["workloads"][workload]["reason"]) for c in cheats}


@cuda
@pytest.mark.parametrize("cheats", BATCHES, ids=[f"batch{i}" for i in range(len(BATCHES))])
def test_bench_fails_every_runtime_cheat_for_its_reason_on_the_gpu(tmp_path, cheats):
    got = _verdicts(_bench(tmp_path, cheats, "f5x1"), cheats, "f5x1")
    for cheat, (status, reason) in got.items():
        print(f"\n{cheat}: {status}: {reason[:200]}")
    wrong = {c: got[c] for c in cheats if got[c][0] != GPU_EXPECTED[c][0] or GPU_EXPECTED[c][1] not in got[c][1]}
    assert not wrong, wrong


@cuda
@pytest.mark.parametrize("cheats, workload", [(CENSUS, "f5x1"), (REPLAYS, "f121x1")], ids=["census", "replays"])
def test_bench_fails_the_cheats_on_the_inputs_on_the_gpu(tmp_path, cheats, workload):
    report = _bench(tmp_path, cheats, workload, "--warmup", "0", "--min-reps", "2", "--max-reps", "2")
    got = _verdicts(report, cheats, workload)
    for cheat, (status, reason) in got.items():
        print(f"\n{cheat}: {status}: {reason[:200]}")
    if workload == "f5x1":
        wrong = {c: got[c] for c in cheats if (got[c][0], INPUTS[c].phrase in got[c][1]) != (INPUTS[c].status, True)}
    else:
        wrong = {c: got[c] for c in cheats if not any(s == got[c][0] and r in got[c][1] for s, r in REPLAYED)}
    assert not wrong, wrong


@cuda
def test_profile_takes_only_the_trace_the_judge_placed_on_the_gpu(tmp_path):
    report = _bench(tmp_path, tuple(PROFILE), "f5x1", "--profile", str(tmp_path / "prof"))
    got = _verdicts(report, tuple(PROFILE), "f5x1")
    for cheat, (status, reason) in got.items():
        print(f"\n{cheat}: {status}: {reason[:200]}")
    wrong = {c: got[c] for c in PROFILE if got[c][0] != PROFILE[c][0] or PROFILE[c][1] not in got[c][1]}
    assert not wrong, wrong
