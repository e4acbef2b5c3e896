"""The tensors the judge owns and lends to the ranks: each rank's weights and latents, rank 0's out.

On the CPU they are sealed memory files that both sides map (the rank gets their descriptors; nobody can change
their size, so no rank can truncate one under the judge's mapping, which would kill the judge with SIGBUS); on GPUs
they are the judge's device memory, each alone in its allocation (CUDA IPC maps a rank the whole allocation a tensor
lies in), which a rank maps through the driver's IPC memory handles (harness/judge/cuda_ipc.py: no file in /dev/shm that
a rank could truncate under the judge). A rank attaches them before it imports the solution; the judge writes
the latents and poisons `out` itself, and reads `out` and checks the inputs itself, so no code of the harness needs
to run in the rank around a call. Each rank gets its own weights and latents (a rank that scribbles on its inputs
harms only itself, and the judge sees it)."""
import fcntl
import math
import os
import pickle

import spec


def _flat_len(shapes):
    return sum(math.prod(s) for s in shapes)


def video_numel(latent_frames, geometry):
    return 3 * spec.frames(latent_frames) * math.prod(geometry.video_hw)


def latent_numel(latent_frames, geometry):
    return geometry.latent_channels * latent_frames * math.prod(geometry.latent_hw)


# The caching allocator gives a request of at least 10 MiB an allocation of its own, rounded up to 2 MiB (a smaller
# one shares a 2 or 20 MiB allocation): a lent GPU buffer takes at least 5 pages of 2 MiB, in whole pages.
PAGE, MIN_PAGES = 1 << 20, 5        # bf16 elements in 2 MiB


def sealed(name, size):
    """A memory file of `size` bytes whose size is sealed: a rank keeps a descriptor of it (Python's mmap keeps a
    copy of the one it maps), and Landlock lets a descriptor opened before the lock truncate its file."""
    fd = os.memfd_create(f"wan-{name}", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    return fd


def alone(t):
    """Raise unless GPU tensor `t`'s storage is the whole of its allocation (its CUDA IPC segment): what a rank maps
    of the judge's memory must hold nothing else."""
    import torch
    base, size = t.untyped_storage().data_ptr(), t.untyped_storage().nbytes()
    for seg in torch.cuda.memory_snapshot():
        if seg["address"] <= base < seg["address"] + seg["total_size"]:
            if seg["address"] == base and seg["total_size"] == size and len(seg["blocks"]) == 1:
                return
            raise RuntimeError(f"a lent GPU buffer of {size} bytes shares an allocation of {seg['total_size']} "
                               f"bytes with {len(seg['blocks']) - 1} other block(s)")
    raise RuntimeError("a lent GPU buffer is not in the caching allocator's snapshot")


class Buffers:
    """Weights (with a pristine copy), latents (with the call's staged copy) per rank, and out on rank 0's device,
    sized for `max_frames` latent frames; made once per run and lent to every group. Each tensor here is the whole of
    what a rank maps (the CPU's memory file in whole pages, the GPU's allocation), the tail past its contents too:
    the judge wipes and checks all a rank can reach, so nothing left in a tail reaches the next group."""

    def __init__(self, geometry, cpu, world, max_frames):
        import torch
        self.torch, self.geometry, self.cpu = torch, geometry, cpu
        self.fds, self.pools = {}, {}
        self.shapes = [shape for _, shape in spec.weight_list(geometry)]
        self.devices = [torch.device("cpu") if cpu else torch.device("cuda", r) for r in range(world)]
        self.max_frames = max_frames
        host = spec.load_weights("cpu", geometry)
        flat_host = torch.cat([w.reshape(-1) for w in host])
        self.weights, self.pristine, self.z, self.staged = [], [], [], []
        for r, dev in enumerate(self.devices):
            w = self._alloc(f"weights{r}", flat_host.numel(), dev)
            w.zero_()
            w[:flat_host.numel()].copy_(flat_host)
            self.weights.append(w)
            self.pristine.append(w.clone())
            self.z.append(self._alloc(f"z{r}", latent_numel(max_frames, geometry), dev))
            self.staged.append(torch.empty_like(self.z[-1]))
        self.out = self._alloc("out", video_numel(max_frames, geometry), self.devices[0])
        self.out.fill_(float("nan"))

    def _alloc(self, name, numel, device):
        """A lent buffer of at least `numel` bf16 elements: the whole of what a rank will map."""
        torch = self.torch
        if device.type == "cpu":
            page = os.sysconf("SC_PAGE_SIZE")
            size = -(-numel * 2 // page) * page
            fd = self.fds[name] = sealed(name, size)
            return torch.from_file(f"/proc/self/fd/{fd}", shared=True, size=size // 2, dtype=torch.bfloat16)
        # A pool of these buffers' own, in whole pages: nothing else of the judge's (the staged latents, the
        # references of fresh latents) is ever placed in an allocation a rank maps, and no tail is split off.
        pool = self.pools.get(device)
        if pool is None:
            pool = self.pools[device] = torch.cuda.MemPool()
        with torch.cuda.use_mem_pool(pool, device=device):
            t = torch.empty(max(-(-numel // PAGE), MIN_PAGES) * PAGE, dtype=torch.bfloat16, device=device)
        alone(t)
        return t

    def lent_fds(self, rank):
        """The descriptors rank `rank` inherits (the CPU's memory files; none on GPUs)."""
        names = [f"weights{rank}", f"z{rank}"] + (["out"] if rank == 0 else [])
        return tuple(self.fds[n] for n in names if n in self.fds)

    def close(self):
        for fd in self.fds.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds = {}

    def lend(self, rank):
        """What rank `rank` needs to map its tensors (pickled; the rank calls attach() with it)."""
        def ref(t, name):
            if t.device.type == "cpu":
                return ("fd", self.fds[name], t.numel())
            from harness.judge import cuda_ipc
            return ("cuda", cuda_ipc.handle(t), t.numel())
        desc = {"shapes": self.shapes, "weights": ref(self.weights[rank], f"weights{rank}"),
                "z": ref(self.z[rank], f"z{rank}"), "out": ref(self.out, "out") if rank == 0 else None,
                "geometry": self.geometry.name}
        return pickle.dumps(desc)

    def wipe(self):
        """Before a group takes these buffers: out poisoned, latents zeroed, the weights as they came."""
        self.out.fill_(float("nan"))
        for r in range(len(self.devices)):
            self.z[r].zero_()
            self.weights[r].copy_(self.pristine[r])
        self.settle()

    # -- the judge's side of a call
    def stage(self, z):
        """Copy the call's latents next to every rank's buffer (before the clock starts)."""
        n = z.numel()
        for r, s in enumerate(self.staged):
            s[:n].copy_(z.reshape(-1))
        self.settle()

    def place(self, n):
        """Put the staged latents where the ranks read them (the clock is running)."""
        for r in range(len(self.devices)):
            self.z[r][:n].copy_(self.staged[r][:n])
        self.settle()

    def poison(self, n):
        self.out[:n].fill_(float("nan"))
        self.settle()

    def out_view(self, latent_frames):
        n = video_numel(latent_frames, self.geometry)
        return self.out[:n].view(1, 3, spec.frames(latent_frames), *self.geometry.video_hw)

    def modified(self, rank, n):
        """What rank `rank` changed of its inputs: [] or ['z', 'the weights']."""
        out = [] if self.torch.equal(self.z[rank][:n], self.staged[rank][:n]) else ["z"]
        return out + (["the weights"] if self.weights_modified(rank) else [])

    def weights_modified(self, rank):
        """Whether rank `rank` changed its weights (then restored here)."""
        if self.torch.equal(self.weights[rank], self.pristine[rank]):
            return False
        self.weights[rank].copy_(self.pristine[rank])
        return True

    def drop_cache(self):
        """Give torch's cached, unused GPU memory of this process back to the driver before a rank's call: the
        judge's own GPU work (references of fresh latents, figures, error maps) leaves its results there, and a
        CUDA IPC memory handle names its allocation by the exporter's pid and a small number, and a rank can make
        one for any allocation this process exported (tools/judge/ipc_handle_probe.py; the driver refuses
        allocations never exported, ipc_forge_probe.py). Afterwards the judge holds on a GPU only these buffers,
        their staged latents and pristine weights, and only these buffers were ever exported."""
        if not self.cpu:
            self.settle()
            self.torch.cuda.empty_cache()

    def settle(self):
        if not self.cpu:
            for d in self.devices:
                self.torch.cuda.synchronize(d)


def premap(blob):
    """The rank's side, before it locks itself down: map the inherited memory files (CPU) with the standard library
    and close their descriptors (their size is sealed either way). Returns {name: mmap} for attach()."""
    import mmap
    desc = pickle.loads(blob)
    maps = {}
    for name in ("weights", "z", "out"):
        ref = desc[name]
        if ref is not None and ref[0] == "fd":
            try:
                maps[name] = mmap.mmap(ref[1], ref[2] * 2, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            finally:
                os.close(ref[1])
    return maps


def attach(blob, device, maps):
    """The rank's side: (weights, z buffer, out buffer or None) as tensors on `device`, from Buffers.lend() and
    premap()."""
    import torch
    desc = pickle.loads(blob)

    def open_(name):
        ref = desc[name]
        if ref is None:
            return None
        if ref[0] == "fd":
            return torch.frombuffer(maps[name], dtype=torch.bfloat16)
        from harness.judge import cuda_ipc
        return cuda_ipc.open_handle(ref[1], ref[2], device)
    flat = open_("weights")
    weights, at = [], 0
    for shape in desc["shapes"]:
        n = math.prod(shape)
        weights.append(flat[at:at + n].view(shape))
        at += n
    return weights, open_("z"), open_("out")


def views(zbuf, outbuf, frames_list, geometry, device):
    """{T: (z, out)}: the latents and out of every clip length, made before the solution is imported, as views of
    the lent buffers (out on ranks other than 0 is an empty tensor)."""
    import torch
    c, (h, w) = geometry.latent_channels, geometry.latent_hw
    out = {}
    for t in frames_list:
        z = zbuf[:latent_numel(t, geometry)].view(1, c, t, h, w)
        if outbuf is not None:
            o = outbuf[:video_numel(t, geometry)].view(1, 3, spec.frames(t), *geometry.video_hw)
        else:
            o = torch.empty(0, dtype=torch.bfloat16, device=device)
        out[t] = (z, o)
    return out
