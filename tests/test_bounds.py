"""bounds.py: the same FLOPs, bytes and GPUs as spec.work, a breakdown that sums to the decode, the arithmetic
of the bound, and the --results / --plot report."""
import json
import math
import os
import subprocess
import sys

import pytest

import bounds
import spec

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(*args):
    return subprocess.run([sys.executable, os.path.join(ROOT, "bounds.py"), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def test_json_equals_spec_work_for_every_workload(tmp_path):
    out = tmp_path / "b.json"
    p = run("--gpu", "H200", "--json", str(out))
    assert p.returncode == 0, p.stderr
    rep = json.loads(out.read_text())
    assert set(rep["workloads"]) == set(spec.WORKLOADS)
    for w, e in rep["workloads"].items():
        b = spec.work(w)
        assert (e["flops"], e["bytes"], e["gpus"]) == (b["flops"], b["bytes"], b["gpus"])
        assert e["bound_s"] > 0


def test_executed_flops_take_five_ninths_off_the_resamples():
    """Phases execute 4 of the 9 taps per output the count credits a resample's 3x3 conv with (about 0.924 of the
    counted FLOPs for a long clip)."""
    for t in (1, 31, 121):
        resample = sum(f for k, lvl, f in bounds.breakdown(t) if k == "resample 3x3 conv2d")
        assert bounds.executed_flops(t) == pytest.approx(spec.decode_flops(t) - 5 / 9 * resample)
    assert bounds.executed_flops(121) / spec.decode_flops(121) == pytest.approx(0.924, abs=0.001)
    e = bounds.report("H200", spec.FULL, results={"workloads": {"f121x1": {"median_s": 3.0}}})["workloads"]["f121x1"]
    assert e["achieved_executed_tflops"] == pytest.approx(e["executed_flops"] / 3.0 / 1e12)


@pytest.mark.parametrize("t", [1, 2, 5, 31, 61, 121])
def test_breakdown_sums_to_the_decode(t):
    rows = bounds.breakdown(t)
    assert sum(f for _, _, f in rows) == spec.decode_flops(t)
    assert sum(f for _, _, f in bounds.breakdown(t, spec.TINY)) == spec.decode_flops(t, spec.TINY)


def test_most_work_is_at_the_two_largest_levels():
    rows = bounds.breakdown(121)
    big = sum(f for _, level, f in rows if level.startswith(("4x", "8x")))
    assert big / spec.decode_flops(121) > 0.8


def test_bound_arithmetic():
    b = bounds.bound("f481x2", "H200")
    flops = spec.decode_flops(121) / 2
    assert b["flops_per_gpu"] == flops
    assert b["compute_s"] == pytest.approx(flops / 989.4e12)
    assert b["memory_s"] == pytest.approx(spec.work("f481x2")["bytes"] / 4.8e12)
    assert b["bound_s"] == max(b["compute_s"], b["memory_s"]) and b["binds"] == "compute"
    # A memory-bound case: at 1 TFLOP/s and 1000 TB/s compute binds; at 1e9 TFLOP/s memory does.
    m = bounds.bound("f1x1", peaks={"bf16_tflops": 1e9, "hbm_tbps": 1.0})
    assert m["binds"] == "memory" and m["bound_s"] == pytest.approx(spec.work("f1x1")["bytes"] / 1e12)


def test_gpu_names():
    assert bounds.gpu_key("NVIDIA H200") == "H200"
    assert bounds.gpu_key("NVIDIA H100 80GB HBM3") == "H100"
    assert bounds.gpu_key("NVIDIA GB200") == "GB200"
    assert bounds.gpu_key("Tesla T4") is None
    assert run("--gpu", "T4").returncode == 2


def test_results_report_and_plot(tmp_path):
    timed = {w: {"median_s": 2.0 * spec.WORKLOADS[w].world ** -1} for w in spec.TIMED_WORKLOADS}
    bench = {"workloads": timed, "objective_s": math.exp(sum(math.log(r["median_s"]) for r in timed.values()) / 9),
             "objective_complete": True}
    (tmp_path / "r.json").write_text(json.dumps(bench))
    (tmp_path / "c.json").write_text(json.dumps({"measured": {"bf16_tflops": 800.0, "hbm_tbps": 4.2,
                                                              "device": "test", "method": "test"}}))
    p = run("--gpu", "H200", "--results", str(tmp_path / "r.json"), "--ceilings", str(tmp_path / "c.json"),
            "--json", str(tmp_path / "b.json"), "--plot", str(tmp_path / "roofline.png"))
    assert p.returncode == 0, p.stderr
    rep = json.loads((tmp_path / "b.json").read_text())
    e = rep["workloads"]["f481x1"]
    assert e["achieved_s"] == 2.0
    assert e["achieved_tflops"] == pytest.approx(spec.decode_flops(121) / 2.0 / 1e12)
    assert e["fraction_of_bound"] == pytest.approx(e["bound_s"] / 2.0)
    assert e["fraction_of_measured_bound"] == pytest.approx(spec.decode_flops(121) / 800e12 / 2.0)
    assert rep["objective"]["fraction_of_bound"] == pytest.approx(rep["objective"]["bound_s"] / bench["objective_s"])
    pytest.importorskip("matplotlib")
    assert (tmp_path / "roofline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
