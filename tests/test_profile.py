"""Named scopes and bench's profile mode: off by default and free, bit-identical results with them on, and a
trace whose events carry the scope names."""
import json
import os
import subprocess
import sys

import pytest
import torch

import reference
import spec
from helpers import random_weights

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCOPES = ["post_quant_conv", "decoder", "decoder/conv_in", "decoder/mid_block", "decoder/mid_block/resnets.0",
          *[f"decoder/mid_block/resnets.0/{n}" for n in ("norm1", "conv1", "norm2", "conv2")],
          *[f"decoder/mid_block/attentions.0/{n}" for n in ("norm", "to_qkv", "attention", "proj")],
          "decoder/up_blocks.0/resnets.2/conv2", "decoder/up_blocks.0/upsampler/time_conv",
          "decoder/up_blocks.0/upsampler/resample", "decoder/up_blocks.0/avg_shortcut",
          "decoder/up_blocks.2/resnets.0/conv_shortcut", "decoder/up_blocks.2/upsampler/resample",
          "decoder/up_blocks.3/resnets.2/conv1", "decoder/norm_out", "decoder/conv_out", "unpatchify"]


def test_scopes_are_off_by_default_and_free():
    assert os.environ.get("WAN_SCOPES") != "1"
    assert reference.scope("decoder/conv_in") is reference.scope("anything")   # one shared null context


def test_outputs_bit_identical_with_scopes_on_and_off():
    w = random_weights()
    z = torch.randn(1, 8, 3, *spec.TINY.latent_hw, generator=torch.Generator().manual_seed(1))
    off = reference.decode_fp32(z, w)
    reference.set_scopes(True)
    try:
        with torch.profiler.profile() as prof:
            on = reference.decode_fp32(z, w)
    finally:
        reference.set_scopes(False)
    assert torch.equal(on, off)
    names = {e.key for e in prof.key_averages()}
    missing = [s for s in SCOPES if s not in names]
    assert not missing, missing


def test_bench_profile_writes_a_trace_with_the_scope_names(tiny_data, tmp_path):
    """The issue's command: bench.py solutions/reference --tiny --workloads f5x1 --profile DIR."""
    env = tiny_data
    p = subprocess.run([sys.executable, "bench.py", "solutions/reference", "--tiny", "--workloads", "f5x1",
                        "--profile", str(tmp_path / "prof")], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    trace = json.loads((tmp_path / "prof" / "reference-f5x1-rank0.json").read_text())
    names = {e.get("name") for e in trace["traceEvents"]}
    missing = [s for s in SCOPES if s not in names]
    assert not missing, missing
    table = json.loads((tmp_path / "prof" / "reference-f5x1-scopes.json").read_text())
    rows = {r["scope"]: r for r in table["ranks"][0]["scopes"]}
    assert rows["decoder"]["total_s"] >= rows["decoder/mid_block"]["total_s"] > 0
    assert rows["decoder/mid_block"]["self_s"] <= rows["decoder/mid_block"]["total_s"]
    assert "time per scope" in p.stdout


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_same_kernels_with_scopes_on_and_off():
    """Scopes only annotate: the GPU runs the same sequence of kernels with them on and off."""
    w = [t.cuda() for t in random_weights()]
    z = torch.randn(1, 8, 3, *spec.TINY.latent_hw, device="cuda")

    def kernels():
        reference.decode_bf16(z, w)   # warm-up: cuDNN and allocator choices settle
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            out = reference.decode_bf16(z, w)
            torch.cuda.synchronize()
        seq = [e.name for e in sorted(prof.events(), key=lambda e: e.time_range.start)
               if str(e.device_type).endswith("CUDA")]
        return seq, out

    off, a = kernels()
    reference.set_scopes(True)
    try:
        on, b = kernels()
    finally:
        reference.set_scopes(False)
    print(f"\n{len(off)} kernels with scopes off, {len(on)} on")
    assert off == on and torch.equal(a, b)
