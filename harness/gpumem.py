"""What a group's processes hold of each GPU's memory, read by the judge through NVML, against a cap per group.

The judge's own GPU work runs beside the groups' memory: the references of fresh latents (the release decode, about
15 GiB at f481), read 1 of `out` and the figures. A group keeps what it allocated while it is frozen and held, so one
that kept nearly a whole GPU would make that work run out of memory, and the run would end for every solution
(tests/cheats_gpu/starves_the_judge.py). So once its CUDA is held after prepare and after each call (it can then
allocate nothing until its next call), a group may hold at most 1/GPU_SHARE of each GPU's memory; and an
out-of-memory error in the judge's work for one call is that group's failure where it holds more than that, else the
judge's. With more than GPU_SHARE - 1 groups at their caps, the judge's share is not left; the README says so."""
import os

from harness import disk

GPU_SHARE = 4


class GpuMemory:
    """NVML's view of the GPUs named by `uuids` (the run's CUDA order); `why_not` says why there is none."""

    def __init__(self, uuids, context=None):
        """context: makes the judge's CUDA context on GPU 0 (NVML lists a process from its context on)."""
        self.handles, self.totals, self.why_not, self.base, self.shares = [], [], None, [], {}
        try:
            import pynvml
            pynvml.nvmlInit()
            self.nvml = pynvml
            if context is not None:
                context()
            for u in uuids:
                h = pynvml.nvmlDeviceGetHandleByUUID(u)
                self.handles.append(h)
                self.totals.append(pynvml.nvmlDeviceGetMemoryInfo(h).total)
            if not self._sees_the_judge():
                self.why_not = "NVML lists no process of the judge's: another PID namespace"
            # What NVML lists for no process before any group starts (the driver's own): a group's share is past it.
            self.base = [self._unlisted(g) or 0 for g in range(len(self.handles))]
        except Exception as e:          # no package, no library, no driver: nothing is capped, and the line says so
            self.handles, self.why_not = [], f"no NVML: {type(e).__name__}"

    def cap(self, gpu):
        return self.totals[gpu] // GPU_SHARE

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
            if used > self.cap(g):
                return (f"its processes held {disk.gib(used)} of GPU {g}'s memory, more than a group's cap of "
                        f"{disk.gib(self.cap(g))} (1/{GPU_SHARE} of it: the judge's decodes and checks need the rest)")
        return None

    def describe(self):
        if self.why_not is not None:
            return f"GPU memory not capped ({self.why_not})"
        return f"GPU memory at most {disk.gib(self.cap(0))} a group"
