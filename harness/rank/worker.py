"""One rank of a solution: `python -m harness.rank CMD_FD RESULT_FD`, started by the judge (harness/judge/group.py).

Before the solution is imported, with nothing of it loaded: read the judge's setup, join the process group, map
the judge's tensors (weights, latents, out), make the views of every clip length, lock the process down
(harness/isolation/landlock.py), snapshot the functions of torch, time and builtins. Then import the solution, call
prepare, and serve the judge's commands, one line each:

    go CALL T NONCE       run(z, weights, rank, world, pg, out) on the T-frame views, synchronise every device
                          this process touched, write `done` (with CALL and NONCE); then `report` (diagnostics)
    profile CALL T NONCE  the same under torch.profiler with the named scopes on; the trace goes where the
                          setup says (a fixed name in scratch, where the judge reads it)
    quit

Everything after the import runs beside the solution and is the solution's to change: the judge trusts none of it
(its clock starts before it writes the latents and stops when every `done` arrives; it reads `out` itself). The
report's findings can only fail a call, never pass one.
"""
import json
import os
import pickle
import signal
import struct
import sys
import time
import traceback

CLOCK = time.monotonic_ns   # diagnostics only: the judge keeps the time


class Rank:
    def __init__(self, cmd_fd, res_fd):
        self.cmd_fd, self.res_fd, self.buf = cmd_fd, res_fd, b""
        size, = struct.unpack("<Q", self._read_exact(8))
        self.setup = pickle.loads(self._read_exact(size))

    def _read_exact(self, n):
        data = b""
        while len(data) < n:
            chunk = os.read(self.cmd_fd, n - len(data))
            if not chunk:
                raise EOFError("the judge closed the command pipe")
            data += chunk
        return data

    def send(self, kind, **fields):
        data = (kind + " " + json.dumps(fields) + "\n").encode()
        while data:
            data = data[os.write(self.res_fd, data):]

    def command(self):
        while b"\n" not in self.buf:
            chunk = os.read(self.cmd_fd, 4096)
            if not chunk:
                return ["quit"]
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode().split()

    def start(self):
        """Everything up to `ready`; False once an error was reported."""
        s = self.setup
        # The lock comes first, before torch starts any thread: Landlock before ABI 8 binds only the calling thread
        # and the threads and children it starts afterwards.
        from harness.isolation import landlock, seccomp
        from harness.judge import buffers
        maps = buffers.premap(s["buffers"])
        info = {"rank": s["rank"], "isolation": {"isolation": "none"}}
        whole = s["device"] == "cpu" or s["world"] == 1
        if s["sandbox"]:
            # harness/isolation/ipc.py, harness/isolation/seccomp.py, harness/isolation/users.py. A user of the group's
            # own where the judge made one, every capability gone but CAP_DAC_READ_SEARCH (NCCL runs without any for
            # ordinary users); the IPC namespace and the filter's metadata part where checked (the CPU; GPUs at world 1,
            # with CUDA, CUDA IPC and the profiler), not yet against NCCL between GPUs (the README's known limits).
            try:
                info.update(seccomp.confine(net=s.get("netns_fd"), whole=whole, user=s.get("user")))
            except OSError as e:
                self.send("error", status="harness error", rank=s["rank"], phase="sandbox", error=str(e))
                return False
        if s["sandbox"]:
            lock = s["sandbox"]
            try:
                reads = landlock.allowed_reads(exclude=lock["exclude"]) + lock["extra"]
                # CUDA names its threads through /proc/<pid>/task/<tid>/comm.
                write = lock["write"] + [f"/proc/{os.getpid()}/task"]
                info["isolation"] = landlock.lock(read=reads, write=write, devices=lock["devices"])
            except landlock.SandboxError as e:
                self.send("error", status="harness error", rank=s["rank"], phase="sandbox", error=str(e))
                return False
        import torch
        import torch.distributed as dist
        import spec
        import reference  # noqa: F401 (loaded before the solution: it may import it)
        from harness.load.solution import load
        from harness.rank import guards
        self.torch, self.dist, self.guards = torch, dist, guards
        self.rank, self.world = s["rank"], s["world"]
        geometry = spec.GEOMETRIES[s["geometry"]]
        self.cpu = s["device"] == "cpu"
        if self.cpu:
            self.device = torch.device("cpu")
            dist.init_process_group("gloo", init_method="env://", rank=self.rank, world_size=self.world)
        else:
            self.device = torch.device("cuda", self.rank)
            torch.cuda.set_device(self.device)
            dist.init_process_group("nccl", init_method="env://", rank=self.rank, world_size=self.world,
                                    device_id=self.device)
        self.pg = dist.group.WORLD
        weights, zbuf, outbuf = buffers.attach(s["buffers"], self.device, maps)
        self.views = buffers.views(zbuf, outbuf, s["frames"], geometry, self.device)
        info.update(device=str(self.device), torch=torch.__version__)
        if not self.cpu:
            info.update(gpu=torch.cuda.get_device_name(self.device), cudnn=torch.backends.cudnn.version(),
                        nccl=".".join(map(str, torch.cuda.nccl.version())))
        try:
            import triton
            info["triton"] = triton.__version__
        except ImportError:
            info["triton"] = None
        if s.get("profiling"):
            # The profiler's first start replaces some of torch's functions (torch._dynamo's wrappers): started here,
            # before the snapshot, that is the harness's change, not the solution's.
            self.profiler().stop()
            reference.set_scopes(False)
        self.snapshot, self.modes = guards.snapshot(torch), guards.modes(torch)
        lent = (weights[0].untyped_storage().data_ptr(), weights[0].untyped_storage().nbytes())
        from harness.rank import census
        unjudged = census.allowance([tuple(w.shape) for w in weights])
        # -- from here on, the solution's code is in this process
        try:
            solution = load(s["solution"])
        except Exception as e:
            self.send("error", status="load error", rank=self.rank, error=_short(e), trace=_trace())
            return False
        t0 = time.perf_counter()
        if solution.prepare is not None:
            try:
                prepared = solution.prepare(weights, self.rank, self.world, self.pg)
                self.sync()
            except Exception as e:
                self.send("error", status="runtime error", rank=self.rank, phase="prepare", error=_short(e),
                          trace=_trace())
                return False
            if not isinstance(prepared, (list, tuple)) or not all(isinstance(t, torch.Tensor) for t in prepared):
                self.send("error", status="runtime error", rank=self.rank, phase="prepare",
                          error=f"prepare returned {type(prepared).__name__}, expected a list of tensors")
                return False
            weights = list(prepared)
        info["prepare_s"] = time.perf_counter() - t0
        tampered = guards.tampered(torch, self.snapshot, self.modes)     # first: the census runs torch's code
        if tampered:
            self.send("error", status="tampering", rank=self.rank, phase="load or prepare", error="; ".join(tampered))
            return False
        narrow = census.narrow(weights, lent, unjudged)
        if narrow:
            self.send("error", status="incorrect", rank=self.rank, phase="prepare",
                      error=f"narrow numerics: {'; '.join(narrow[:4])}")
            return False
        self.run, self.weights = solution.run, weights
        self.send("ready", **info)
        return True

    def sync(self):
        """Wait for this rank's device and every other device the process touched (a primary context exists), so
        work sent to another GPU is inside the call too."""
        if self.cpu:
            return
        torch = self.torch
        for d in range(torch.cuda.device_count()):
            if d == self.device.index or torch._C._cuda_hasPrimaryContext(d):
                torch.cuda.synchronize(d)

    def serve(self):
        while True:
            cmd = self.command()
            if cmd[0] == "quit":
                return
            call, t, nonce = int(cmd[1]), int(cmd[2]), cmd[3]
            z, out = self.views[t]
            layout = (out.untyped_storage().data_ptr(), out.data_ptr(), tuple(out.shape), out.stride())
            threads = self.guards.threads()
            if not self.cpu:
                self.torch.cuda.reset_peak_memory_stats(self.device)
            prof = self.profiler() if cmd[0] == "profile" else None
            t0 = CLOCK()
            try:
                # a new list each call: the list itself is no place to keep state from one call to the next
                self.run(z, list(self.weights), self.rank, self.world, self.pg, out)
                self.sync()
            except Exception as e:
                self.send("error", status="runtime error", rank=self.rank, call=call, error=_short(e),
                          trace=_trace())
                return   # the judge ends the group: peers may be stuck in a collective
            t1 = CLOCK()
            self.send("done", call=call, nonce=nonce)
            self.report(call, t0, t1, out, layout, threads, prof)

    def report(self, call, t0, t1, out, layout, threads, prof):
        problems = []
        left = self.guards.threads_left(threads)
        if left:
            problems.append(["tampering", f"rank {self.rank}: threads left running after the call: {left}"])
        tampered = self.guards.tampered(self.torch, self.snapshot, self.modes)
        if tampered:
            problems.append(["tampering", f"rank {self.rank}: {'; '.join(tampered)}"])
        if (out.untyped_storage().data_ptr(), out.data_ptr(), tuple(out.shape), out.stride()) != layout:
            problems.append(["incorrect", f"rank {self.rank}: out's storage, shape or strides changed"])
        if prof is not None:
            import reference
            prof.stop()
            reference.set_scopes(False)
            prof.export_chrome_trace(self.setup["trace"])   # where the judge looks (in scratch), whatever a rank says
        peak = None if self.cpu else self.torch.cuda.max_memory_allocated(self.device)
        self.send("report", call=call, t0=t0, t1=t1, peak=peak, problems=problems)

    def profiler(self):
        import reference
        from torch.profiler import ProfilerActivity, profile
        reference.set_scopes(True)
        prof = profile(activities=[ProfilerActivity.CPU] + ([] if self.cpu else [ProfilerActivity.CUDA]))
        prof.start()
        return prof


def _short(e):
    text = f"{type(e).__name__}: {e}"
    return text if len(text) < 2000 else text[:2000] + " ..."


def _trace(keep=64 << 10):
    """The current traceback's end: a message can be megabytes (a compiler's, quoting its source), and a line past
    the protocol's limit would read as tampering."""
    text = traceback.format_exc()
    return text if len(text) <= keep else "... " + text[-keep:]


def main():
    cmd_fd, res_fd = int(sys.argv[1]), int(sys.argv[2])     # argv[3], the run's folder, is for `ps` only
    # Python ignores SIGXFSZ: a file past the judge's cap (RLIMIT_FSIZE) then ends the rank, where the judge names it.
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
    rank = None
    try:
        rank = Rank(cmd_fd, res_fd)
        if rank.start():
            rank.serve()
    except Exception as e:
        msg = {"status": "harness error", "rank": getattr(rank, "rank", -1), "error": _short(e),
               "trace": _trace()}
        try:
            os.write(res_fd, ("error " + json.dumps(msg) + "\n").encode())
        except OSError:
            pass
    finally:
        try:
            if rank is not None and hasattr(rank, "dist"):
                rank.dist.destroy_process_group()
        except Exception:
            pass
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)   # no atexit hooks, no waiting on a solution's threads


if __name__ == "__main__":
    main()
