"""harness/isolation/gpu_memory.py against a stand-in NVML: a group's GPU memory against its cap, and whose an
out-of-memory error in the judge's checks is (the real driver: tests/gpu/test_gpu.py's starves_the_judge)."""
import os
import sys
import types

import pytest

from harness.isolation.caps import Caps
from harness.isolation.gpu_memory import FLOOR, MARGIN, GpuMemory
from harness.judge.protocol import GroupFailed

GIB = 1 << 30


def _nvml(monkeypatch, used, total=80 * GIB, unlisted=0):
    """A pynvml whose every GPU has `total` bytes and runs the processes `used` {pid: bytes or None}, with `unlisted`
    bytes more in use that it lists for no process. Returns its state, to change between counts."""
    state = {"used": used, "unlisted": unlisted}
    fake = types.SimpleNamespace(
        nvmlInit=lambda: None,
        nvmlDeviceGetHandleByUUID=lambda u: u,
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(
            total=total, used=sum(b or 0 for b in state["used"].values()) + state["unlisted"]),
        nvmlDeviceGetComputeRunningProcesses=lambda h: [types.SimpleNamespace(pid=p, usedGpuMemory=b)
                                                       for p, b in state["used"].items()])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    return state


def test_a_group_may_keep_what_the_judge_does_not_need(monkeypatch):
    """The cap is the GPU's memory less what the judge holds, its work's measured need (GPU 0 only) and a margin,
    shared by the groups alive at once; before the judge has measured its need, a quarter of the GPU."""
    _nvml(monkeypatch, {10: 15 * GIB, 11: 6 * GIB, 99: 70 * GIB, os.getpid(): 3 * GIB})    # 99: another group's
    meter = GpuMemory(["GPU-a", "GPU-b"])
    assert meter.cap(0) == 20 * GIB and "a quarter of it" in meter.over({10, 11}, 1)
    meter.reserve(10 * GIB, 1)
    assert meter.cap(0) == 80 * GIB - 3 * GIB - 10 * GIB - MARGIN == 66 * GIB
    assert meter.cap(1) == 76 * GIB                     # the judge's decodes and checks run on GPU 0 only
    assert meter.over({10, 11}, 2) is None
    assert meter.describe() == ("GPU memory at most 66 GiB a group (the GPU's 80 GiB less the judge's 3 GiB held, "
                                "10 GiB for its decodes and checks, 1 GiB margin)")
    meter.reserve(10 * GIB, 2)                          # two solutions' groups alive at once (bench)
    assert meter.cap(0) == 33 * GIB and meter.over({10, 11}, 1) is None
    why = meter.over({10, 11, 99}, 1)
    assert why.startswith("its processes held 91 GiB of GPU 0's memory, more than a group's cap of 33 GiB (the "
                          "GPU's 80 GiB less"), why
    assert why.endswith("shared by 2 groups; `bench.py --at-once 1` gives each group the whole)")
    monkeypatch.setenv("WAN_GPU_MEMORY_GIB", "40")     # the caps of a smaller card
    meter = GpuMemory(["GPU-a"])
    meter.reserve(10 * GIB, 1)
    assert meter.cap(0) == 26 * GIB


def test_bench_keeps_alive_at_once_only_groups_that_may_each_keep_the_floor(monkeypatch):
    """Seven honest solutions benched together on an 80 GB card would each get a seventh of what the judge leaves
    (7.4 GiB): less than a plain decoder keeps. bench runs them in waves of as many as get FLOOR each."""
    for total, need, holds, fits in ((79.2, 24.5, 1.65, 2), (139.8, 24.5, 1.65, 4), (40, 24.5, 1.65, 1)):
        _nvml(monkeypatch, {os.getpid(): int(holds * GIB)}, total=int(total * GIB))
        meter = GpuMemory(["GPU-a"])
        assert meter.at_once(7) == 7                     # before the judge's need is measured: nothing to say
        meter.reserve(int(need * GIB), 7)
        assert meter.cap(0) < FLOOR                      # 7.4 GiB on the 80 GB card
        assert meter.at_once(7) == fits and meter.at_once(1) == 1
        meter.reserve(int(need * GIB), fits)
        assert meter.cap(0) >= FLOOR or fits == 1
        if fits > 1:
            meter.reserve(int(need * GIB), fits + 1)
            assert meter.cap(0) < FLOOR
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert GpuMemory(["GPU-a"]).at_once(7) == 7          # not capped: every group at once


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


class _Group(Caps):
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


def test_memory_listed_for_no_process_is_the_group_that_made_it(monkeypatch):
    """The driver's memory objects a process keeps only by an exported descriptor are in no process's figure: what
    NVML lists for no process beyond the run's start is charged to the group counted, less what earlier groups were
    charged with (frozen and held meanwhile, they made none of it); a group gone takes its share with it."""
    me, other = os.getpid(), os.getppid()
    state = _nvml(monkeypatch, {me: GIB}, unlisted=2 * GIB)            # 2 GiB the driver's own at the start
    meter = GpuMemory(["GPU-a"])
    assert meter.held({me}, 1) == [GIB]
    state["unlisted"] = 2 * GIB + 30 * GIB                               # hidden since: this group's
    assert meter.held({me}, 1) == [31 * GIB] and meter.over({me}, 1).startswith("its processes held 31 GiB")
    state["unlisted"] += 5 * GIB                                          # another group's, after the first's 30
    assert meter.held({other}, 1) == [5 * GIB]
    assert meter.held({me}, 1) == [31 * GIB]                              # the first keeps its own share only
    meter.shares[frozenset({2 ** 22 + 1})] = meter.shares.pop(frozenset({other}))     # a group whose pids are gone
    state["unlisted"] -= 5 * GIB                                          # ... and its memory with them
    assert meter.held({me}, 1) == [31 * GIB]
