"""harness/gpumem.py against a stand-in NVML: a group's GPU memory against its cap, and whose an out-of-memory error
in the judge's checks is (the real driver: tests/test_gpu.py's starves_the_judge)."""
import os
import sys
import types

import pytest

from harness.gpumem import GPU_SHARE, GpuMemory
from harness.holdings import Holdings
from harness.protocol import GroupFailed

GIB = 1 << 30


def _nvml(monkeypatch, used, total=80 * GIB):
    """A pynvml whose every GPU has `total` bytes and runs the processes `used` {pid: bytes or None}."""
    fake = types.SimpleNamespace(
        nvmlInit=lambda: None,
        nvmlDeviceGetHandleByUUID=lambda u: u,
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(total=total),
        nvmlDeviceGetComputeRunningProcesses=lambda h: [types.SimpleNamespace(pid=p, usedGpuMemory=b)
                                                       for p, b in used.items()])
    monkeypatch.setitem(sys.modules, "pynvml", fake)


def test_a_group_over_a_quarter_of_a_gpu_is_named_and_one_under_it_is_not(monkeypatch):
    _nvml(monkeypatch, {10: 15 * GIB, 11: 6 * GIB, 99: 70 * GIB, os.getpid(): GIB})    # 99: another group's
    meter = GpuMemory(["GPU-a", "GPU-b"])
    assert meter.cap(0) == 80 * GIB // GPU_SHARE == 20 * GIB
    assert meter.over({10}, 2) is None
    why = meter.over({10, 11}, 1)
    assert why.startswith("its processes held 21 GiB of GPU 0's memory, more than a group's cap of 20 GiB"), why
    assert meter.describe() == "GPU memory at most 20 GiB a group"


def test_without_nvml_or_its_figures_nothing_is_capped_and_the_line_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)          # import fails
    meter = GpuMemory(["GPU-a"])
    assert meter.over({1}, 1) is None and meter.describe() == "GPU memory not capped (no NVML: ModuleNotFoundError)"
    _nvml(monkeypatch, {10: None, os.getpid(): GIB})         # a platform that hides the processes' use
    assert GpuMemory(["GPU-a"]).over({10}, 1) is None
    _nvml(monkeypatch, {10: 70 * GIB})          # NVML's pids are not ours (another PID namespace): the judge unseen
    meter = GpuMemory(["GPU-a"], context=lambda: None)
    assert meter.over({10}, 1) is None
    assert meter.describe() == "GPU memory not capped (NVML lists no process of the judge's: another PID namespace)"


class _Group(Holdings):
    def __init__(self, meter, pid):
        self.run, self.world, self.jail = types.SimpleNamespace(gpumem=meter), 1, None
        self.procs = [types.SimpleNamespace(pid=pid)]


def test_the_judges_shortage_is_the_groups_only_past_its_cap(monkeypatch):
    me = os.getpid()
    err = RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB\nmore")
    _nvml(monkeypatch, {me: 30 * GIB})
    group = _Group(GpuMemory(["GPU-a"]), me)
    failed = group.short_of_gpu_memory(err)
    assert failed.status == "runtime error" and "30 GiB of GPU 0's memory" in failed.message
    assert failed.message.endswith("when the judge's checks of its call ran out of GPU memory")
    with pytest.raises(GroupFailed, match="after its call"):
        group._gpu_memory("after its call")
    _nvml(monkeypatch, {me: 3 * GIB})
    group = _Group(GpuMemory(["GPU-a"]), me)
    group._gpu_memory("after its call")
    failed = group.short_of_gpu_memory(err)
    assert failed.status == "harness error" and "under its GPU memory cap" in failed.message
    assert failed.message.endswith("CUDA out of memory. Tried to allocate 2.00 GiB")
