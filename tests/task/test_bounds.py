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

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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


def test_report_on_given_peaks():
    """bench's report of a CPU run: the bounds and the executed fraction on the CPU stand-in, named as given."""
    rep = bounds.report("CPU stand-in", spec.TINY, results={"workloads": {"f121x2": {"median_s": 2.0}}},
                        peaks=bounds.CPU_PEAK)
    e = rep["workloads"]["f121x2"]
    assert rep["peaks"] == bounds.CPU_PEAK
    assert e["bound_s"] == bounds.bound_of(31, 2, bounds.CPU_PEAK, spec.TINY)["bound_s"]
    assert e["fraction_of_executed_ceiling"] == pytest.approx(e["executed_flops"] / 2 / 2.0 / 0.025e12)


@pytest.mark.parametrize("t", [1, 2, 5, 31, 61, 121])
def test_breakdown_sums_to_the_decode(t):
    rows = bounds.breakdown(t)
    assert sum(f for _, _, f, _ in rows) == spec.decode_flops(t)
    assert sum(f for _, _, f, _ in bounds.breakdown(t, spec.TINY)) == spec.decode_flops(t, spec.TINY)
    assert sum(x for _, _, _, x in rows) == pytest.approx(sum(bounds.executed_by_weight(t).values()))


def test_most_work_is_at_the_two_largest_levels():
    rows = bounds.breakdown(121)
    big = sum(f for _, level, f, _ in rows if level.startswith(("4x", "8x")))
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


def test_floor_counts_one_multiply_add_per_channel_pair_and_output():
    # One 3x3x3 conv by hand: 2 x Co x Ci x frames x rows x columns, 1/27 of its counted FLOPs.
    name = "decoder.up_blocks.3.resnets.1.conv1.weight"
    co, ci = dict(spec.weight_list())[name][:2]
    frames, scale = spec.conv_level(name, 31)
    by_hand = 2 * co * ci * frames * 44 * scale * 78 * scale
    assert spec.flops_by_weight(31)[name] == 27 * by_hand
    one_conv = {"attention": 0, name: spec.flops_by_weight(31)[name]}
    assert sum(f if n == "attention" else f / 27 for n, f in one_conv.items()) == by_hand
    # Well below what exact methods execute: F(2x2,3x3) Winograd on every 3x3x3 conv and the phase fold of the
    # resamples (each 4/9 of the counted work; the floor is 1/12 of that for these convs) leave five times the floor.
    shapes = dict(spec.weight_list())
    executed = sum(f * (4 / 9 if n != "attention" and math.prod(shapes[n][2:]) in (9, 27) else 1)
                   for n, f in spec.flops_by_weight(31).items())
    assert spec.floor_flops(31) < executed / 5


def test_impossible_admits_exact_algorithms_and_not_replays():
    peaks = bounds.GPUS["H200"]
    b = bounds.bound("f121x1")
    # A decode at twice the datasheet rate on the counted FLOPs (Winograd everywhere would need about 2.25x) passes;
    assert bounds.impossible(b["bound_s"] / 2, 31, 1, peaks) is None
    # a call that only copies a stored video (1.3 GB at the HBM rate) is far below the floor.
    replay = spec.work("f121x1")["bytes"] / (peaks["hbm_tbps"] * 1e12)
    assert b["floor_s"] > 100 * replay
    assert "below the roofline floor" in bounds.impossible(10 * replay, 31, 1, peaks)
    # On the CPU the stand-in floor of the tiny f5 stays above a millisecond.
    assert bounds.bound_of(2, 1, bounds.CPU_PEAK, spec.TINY)["floor_s"] > 1e-3


def test_executed_flops_follow_the_baselines_algorithms(monkeypatch):
    from helpers import baseline
    sol = baseline()
    # bounds' copy of the baseline's Winograd levels (bounds imports no solution) is the baseline's.
    assert bounds.BASELINE_WINOGRAD_COLS == {2 ** level: cols for level, cols in sol.WINOGRAD_COLS.items()}
    counted, executed = spec.flops_by_weight(31), bounds.executed_by_weight(31)
    by_level = {n: spec.conv_level(n, 31)[1] for n in counted if n != "attention"}
    # A 3x3x3 conv at 2x by Winograd F(2x2): 16 of 36 multiplies, by F(2x4): 24 of 72; at 8x the direct conv; a
    # resample by phases: 4 of 9.
    up1 = "decoder.up_blocks.1.resnets.0.conv1.weight"
    for cols, share in ((2, 16 / 36), (4, 24 / 72)):
        monkeypatch.setattr(bounds, "BASELINE_WINOGRAD_COLS", {1: 2, 2: cols, 4: 2})
        assert bounds.executed_by_weight(31)[up1] == counted[up1] * share
    monkeypatch.undo()
    assert executed["decoder.up_blocks.3.resnets.0.conv1.weight"] == counted["decoder.up_blocks.3.resnets.0.conv1.weight"]
    assert executed["decoder.up_blocks.2.upsampler.resample.1.weight"] == \
        counted["decoder.up_blocks.2.upsampler.resample.1.weight"] * 4 / 9
    assert executed["attention"] == counted["attention"]
    winograd = {n for n in counted if n != "attention" and executed[n] != counted[n] and ".resample." not in n}
    assert winograd == {f"{n}.weight" for n in sol.winograd_convs(spec.FULL)}
    assert all(by_level[n] in bounds.BASELINE_WINOGRAD_COLS for n in winograd)


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


def test_each_profiled_scope_is_at_its_levels_scale():
    """Up block i reads 2^i times the latent grid (spec.UP_BLOCKS); its resample writes twice that; the time conv
    keeps its input's scale; the head is at the video's; halo exchange and gather are communication."""
    t = 31
    assert bounds.scope_level("post_quant_conv", t) == 1
    assert bounds.scope_level("decoder/mid_block/attentions.0/to_qkv", t) == 1
    for i in range(4):
        assert bounds.scope_level(f"decoder/up_blocks.{i}", t) == 2 ** i
        assert bounds.scope_level(f"decoder/up_blocks.{i}/resnets.2/norm1", t) == 2 ** i
    for i in range(3):
        assert bounds.scope_level(f"decoder/up_blocks.{i}/upsampler", t) == 2 ** i
        assert bounds.scope_level(f"decoder/up_blocks.{i}/upsampler/resample", t) == 2 ** (i + 1)
    assert bounds.scope_level("decoder/up_blocks.1/upsampler/time_conv", t) == 2
    assert bounds.scope_level("decoder/norm_out", t) == bounds.scope_level("unpatchify", t) == 8
    assert bounds.scope_level("halo_exchange", t) is bounds.scope_level("gather", t) is None


PROFILED = os.path.join(ROOT, "results", "h200", "profile", "bench_profiled_f121_d9b3bba.json")


def test_a_profiled_calls_time_per_level_is_the_sum_of_its_scopes(tmp_path):
    """bench's JSON of a profiled run (one recorded on an H200): each level's time is the self time of the scopes
    whose names place them there, summed by hand here; the rows cover the call; the executed FLOPs per level add up to
    executed_by_weight over the world, at the ceiling given."""
    with open(PROFILED) as f:
        bench = json.load(f)
    rep = bounds.report("H200", spec.FULL, {"bf16_tflops": 800.0, "hbm_tbps": 4.0, "device": "t", "method": "t"},
                        bounds.load_results([PROFILED]))
    assert rep["levels_ceiling"] == "measured"
    for w in ("f121x1", "f121x2"):
        rows = {r["level"]: r for r in rep["levels"][w]}
        scopes = bench["workloads"][w]["profile"]["ranks"][0]["scopes"]
        call = bench["workloads"][w]["profile"]["ranks"][0]["call_s"]
        head = ("decoder/up_blocks.3", "decoder/norm_out", "decoder/conv_out", "unpatchify",
                "decoder/up_blocks.2/upsampler/resample")
        own = sum(r["self_s"] for r in scopes if r["scope"].startswith(head))
        assert rows[bounds.LEVELS[8]]["profiled_s"] == pytest.approx(own)
        talk = sum(r["self_s"] for r in scopes if r["scope"] in ("halo_exchange", "gather"))
        assert rows["communication"]["profiled_s"] == pytest.approx(talk)
        assert (talk > 0) == (w == "f121x2")
        assert sum(r["profiled_s"] for r in rows.values()) == pytest.approx(max(call, sum(r["self_s"] for r in scopes)))
        world = spec.WORKLOADS[w].world
        assert sum(r["executed_flops"] for r in rows.values()) == pytest.approx(
            sum(bounds.executed_by_weight(31).values()) / world)
        for r in rows.values():
            assert r["ceiling_s"] == pytest.approx(r["executed_flops"] / 800e12)
    p = run("--gpu", "H200", "--results", PROFILED)
    assert p.returncode == 0 and "f121x2, the profiled call (rank 0)" in p.stdout, p.stderr


TRACE = os.path.join(ROOT, "results", "h200", "baseline-f121x1-rank0.json.gz")


def test_the_kernel_table_places_each_kernel_at_its_innermost_scopes_level():
    """tools/baseline/kernel_table.py gives each kernel to the innermost scope around it; per level its sums equal
    the scope table's self times (harness/report/profile.py, which finds each scope's kernels inside its range),
    and its total is every kernel, copy and memset of the trace."""
    sys.path.insert(0, os.path.join(ROOT, "tools", "baseline"))
    import kernel_table
    from harness.report.profile import gpu_work, read_trace, scope_table
    events = read_trace(TRACE)
    rows, total = kernel_table.table(events, "f121x1")
    assert total == pytest.approx(sum(e["dur"] for e in gpu_work(events)) / 1e6)
    by_level = {}
    for (level, _), (s, _) in rows.items():
        by_level[level] = by_level.get(level, 0.0) + s
    scopes = {}
    for row in scope_table(events):
        label = bounds.level_label(bounds.scope_level(row["scope"], 31))
        scopes[label] = scopes.get(label, 0.0) + row["self_s"]
    assert set(scopes) == set(by_level) - {"outside"}
    for label, s in scopes.items():
        assert by_level[label] == pytest.approx(s, rel=1e-9, abs=1e-9), label
    assert rows[(bounds.LEVELS[8], "cuDNN conv")][0] > 0.3 * total     # the fb65996 trace: direct convs throughout
