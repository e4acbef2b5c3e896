"""The baseline's Triton kernels against their PyTorch twins and against the reference's own ops.

On the CPU the kernels run under TRITON_INTERPRET=1 in a subprocess (fp32: the interpreter has no bf16); on the GPU
(`pytest -m gpu`) they compile and run in bf16. The checks themselves are in kernel_checks.py."""
import os
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECKS = os.path.join(ROOT, "tests", "kernel_checks.py")
NAMES = {"rows: sum", "rows: norm+silu", "rows: nothing outside the window", "rows: bias only",
         "shuffle 16->16 ft=2 a=0", "shuffle 16->16 ft=2 a=1", "shuffle 16->8 ft=1 a=0", "head",
         "head: other frames untouched"} | {
         f"winograd {case}{tile}{rows}" for case in ("16->16 6x10 pad 1", "16->32 5x7 pad 1", "32->16 5x9 pad 0")
         for tile in ("", " 2x4 tiles") for rows in ("", " by tile rows")}


def _checks(*args, interpret=True):
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    p = subprocess.run([sys.executable, CHECKS, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    rows = {}
    for line in p.stdout.strip().splitlines():
        name, twin, truth, used = line.split("\t")
        rows[name] = (float(twin), float(truth), used == "triton=True")
    return rows


def test_kernels_equal_their_twins_under_the_interpreter():
    rows = _checks("cpu", "float32")
    assert set(rows) == NAMES
    for name, (twin, truth, used) in rows.items():
        assert used, f"{name}: the Triton kernel did not run"
        assert twin <= 1e-5 and truth <= 1e-5, (name, twin, truth)


def test_the_twins_run_without_the_interpreter():
    """Without a GPU or the interpreter the solution falls back to the twins (what the CPU harness runs)."""
    rows = _checks("cpu", "float32", interpret=False)
    assert set(rows) == NAMES
    assert not any(used for _, _, used in rows.values())
    assert all(truth <= 1e-5 for _, truth, _ in rows.values()), rows


@pytest.mark.slow
def test_baseline_with_its_kernels_equals_the_reference():
    """The whole decode with the Triton kernels (interpreted) against reference.decode, tiny geometry, fp32 (slow
    tier: 13 s; the default tier checks each kernel against its twin and the baseline's decode without them)."""
    rows = _checks("decode")
    twin, truth, used = rows["decode"]
    assert used and truth < 1e-4, rows


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_kernels_in_bf16_on_the_gpu():
    """Compiled, bf16: the kernel and its twin both compute in fp32 and round once (at most an ulp apart); the
    reference's ops in fp32 on the same bf16 inputs differ by the final rounding (and, for the shuffle, the phase
    weights' rounding)."""
    rows = _checks("cuda", "bfloat16", interpret=False)
    for name, (twin, truth, used) in rows.items():
        print(f"{name}: twin {twin:.3e}, truth {truth:.3e}")
        assert used
        assert twin <= 0.0625 and truth <= 0.125, (name, twin, truth)
