"""What a group's processes hold of each GPU's memory, read by the judge through NVML, against a cap per group.

The judge's own GPU work runs beside the groups' memory: the references of fresh latents (fp32 and release bf16
decodes), read 1 of `out` and the figures. A group keeps what it allocated while it is frozen and held (PyTorch's
caching allocator keeps what a call freed), so one that kept nearly a whole GPU would make that work run out of memory,
and the run would end for every solution (tests/cheats_gpu/starves_the_judge.py). So the judge measures what its own
work takes before any group starts (fresh.Fresh.need: it does that work once), and a group, once its CUDA is held
after prepare and after each call (it can then allocate nothing until its next call), may keep what is left:

    cap = (the GPU's memory - what the judge holds there - its work's need (GPU 0) - MARGIN) / groups alive at once

(one group in the gate; in bench, one per solution of a wave). bench keeps the groups of several solutions alive at
once (their calls interleaved) only while each may keep at least FLOOR: more solutions run in waves, one after
another (at_once). An out-of-memory error in the judge's work for one call is that group's failure where it holds
more than its cap, else the judge's. WAN_GPU_MEMORY_GIB makes the cap that of a card of that size (to check an 80 GB
card's caps on a larger one)."""
import os

from harness.isolation import disk

MARGIN = 1 << 30        # the judge's allocations outside torch's pool, fragmentation
# The least cap a group gets in bench beside others: the honest corpus keeps at most 15.3 GiB between calls
# (tests/honest/cuda_graph.py at f121x1, docs/perf-notes.md); the judge's buffers of each group come out of it too.
FLOOR = 24 << 30


class GpuMemory:
    """NVML's view of the GPUs named by `uuids` (the run's CUDA order); `why_not` says why there is none."""

    def __init__(self, uuids, context=None):
        """context: makes the judge's CUDA context on GPU 0 (NVML lists a process from its context on)."""
        self.handles, self.totals, self.why_not, self.base, self.shares = [], [], None, [], {}
        self.need, self.groups = None, 1       # the judge's work's bytes (reserve()), groups alive at once
        try:
            import pynvml
            pynvml.nvmlInit()
            self.nvml = pynvml
            if context is not None:
                context()
            for u in uuids:
                h = pynvml.nvmlDeviceGetHandleByUUID(u)
                self.handles.append(h)
                total = pynvml.nvmlDeviceGetMemoryInfo(h).total
                modelled = os.environ.get("WAN_GPU_MEMORY_GIB")
                self.totals.append(min(total, int(float(modelled) * 2**30)) if modelled else total)
            if not self._sees_the_judge():
                self.why_not = "NVML lists no process of the judge's: another PID namespace"
            # What NVML lists for no process before any group starts (the driver's own): a group's share is past it.
            self.base = [self._unlisted(g) or 0 for g in range(len(self.handles))]
        except Exception as e:          # no package, no library, no driver: nothing is capped, and the line says so
            self.handles, self.why_not = [], f"no NVML: {type(e).__name__}"

    def reserve(self, need, groups):
        """The judge's work takes `need` bytes of GPU 0 beyond what it holds; `groups` groups are alive at once."""
        self.need, self.groups = need, max(1, groups)

    def at_once(self, groups):
        """How many of `groups` groups may be alive at once with a cap of at least FLOOR each on GPU 0 (at least
        one); all of them where nothing is capped."""
        if self.why_not is not None or self.need is None:
            return groups
        free = self.totals[0] - self.judge_holds(0) - self.need - MARGIN
        return max(1, min(groups, free // FLOOR))

    def judge_holds(self, gpu):
        """Bytes of GPU `gpu` the judge holds for itself: what NVML lists for this process (its context, its buffers,
        its weights), less what torch keeps cached and unused, which its work reuses (counted in its need)."""
        import torch
        mine = sum(p.usedGpuMemory or 0 for p in self.nvml.nvmlDeviceGetComputeRunningProcesses(self.handles[gpu])
                   if p.pid == os.getpid())
        if torch.cuda.is_initialized():
            mine -= torch.cuda.memory_reserved(gpu) - torch.cuda.memory_allocated(gpu)
        return max(0, mine)

    def cap(self, gpu):
        """A group's share of GPU `gpu` now; before reserve(), a quarter of it."""
        if self.need is None:
            return self.totals[gpu] // 4
        free = self.totals[gpu] - self.judge_holds(gpu) - (self.need if gpu == 0 else 0) - MARGIN
        return max(0, free) // self.groups

    def _view(self, g):
        """({pid: bytes of GPU g it holds} by NVML's list, the bytes of GPU g in use), or None where NVML does not
        say what a process holds (a platform that hides it)."""
        n, h, per = self.nvml, self.handles[g], {}
        for p in n.nvmlDeviceGetComputeRunningProcesses(h):
            if p.usedGpuMemory is None:
                return None
            per[p.pid] = per.get(p.pid, 0) + p.usedGpuMemory
        return per, n.nvmlDeviceGetMemoryInfo(h).used

    def _unlisted(self, g):
        view = self._view(g)
        return None if view is None else view[1] - sum(view[0].values())

    def held(self, pids, gpus):
        """[bytes of GPU g that processes `pids` hold, for g in range(gpus)], or None where NVML does not say. What
        NVML lists of them, and the memory it lists for no process (the driver's memory objects that a process keeps
        only by an exported descriptor: unmapped, they are in no process's figure) that appeared since the run
        began and that no other live group was charged with: the other groups were frozen and held while it
        appeared, so it is this one's."""
        pids = frozenset(pids)
        for key in [k for k in self.shares if not any(os.path.exists(f"/proc/{p}") for p in k)]:
            del self.shares[key]          # a group gone: what it made went with its descriptors
        out, shares = [], []
        for g in range(min(gpus, len(self.handles))):
            view = self._view(g)
            if view is None:
                return None
            per, used = view
            others = sum(s[g] for k, s in self.shares.items() if k != pids and g < len(s))
            share = max(0, used - sum(per.values()) - self.base[g] - others)
            shares.append(share)
            out.append(sum(b for p, b in per.items() if p in pids) + share)
        self.shares[pids] = shares
        return out

    def _sees_the_judge(self):
        """Whether NVML lists this process on GPU 0, where the judge holds its buffers: in a PID namespace other than
        the driver's its pids are not ours, nothing would match, and every group would look empty."""
        mine = os.getpid()
        return any(p.pid == mine for p in self.nvml.nvmlDeviceGetComputeRunningProcesses(self.handles[0]))

    def over(self, pids, gpus):
        """None, or the words for the first GPU of `gpus` of which `pids` hold more than the cap."""
        if self.why_not is not None:
            return None
        held = self.held(pids, gpus)
        for g, used in enumerate(held or []):
            cap = self.cap(g)
            if used > cap:
                alone = "; `bench.py --at-once 1` gives each group the whole" if self.groups > 1 else ""
                return (f"its processes held {disk.gib(used)} of GPU {g}'s memory, more than a group's cap of "
                        f"{disk.gib(cap)} ({self.why(g)}{alone})")
        return None

    def why(self, gpu):
        """The cap's reason in words."""
        if self.need is None:
            return "a quarter of it"
        need = f", {disk.gib(self.need)} for its decodes and checks" if gpu == 0 else ""
        share = f", shared by {self.groups} groups" if self.groups > 1 else ""
        return (f"the GPU's {disk.gib(self.totals[gpu])} less the judge's {disk.gib(self.judge_holds(gpu))} held"
                f"{need}, {disk.gib(MARGIN)} margin{share}")

    def describe(self):
        if self.why_not is not None:
            return f"GPU memory not capped ({self.why_not})"
        return f"GPU memory at most {disk.gib(self.cap(0))} a group ({self.why(0)})"
