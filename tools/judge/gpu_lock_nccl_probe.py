"""Does a NCCL communicator (a rank's process group, made at once with `device_id`) make the driver's process lock
(cuCheckpointProcessLock) refuse a process? A child at world 1 starts the group as a rank does (harness/rank/worker.py),
with NCCL's cuMem allocations on (its default) and off, then after a first collective; the parent locks it.

    python tools/judge/gpu_lock_nccl_probe.py

Prints each case's CUresult (0: locked; 801: not supported)."""
import ctypes
import os
import subprocess
import sys

CHILD = r"""
import os, sys, torch, torch.distributed as dist
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[2])
dev = torch.device("cuda", 0)
torch.cuda.set_device(dev)
x = torch.ones(1 << 20, device=dev)
if sys.argv[1] != "none":
    dist.init_process_group("nccl", init_method="env://", rank=0, world_size=1,
                            device_id=dev if sys.argv[1] != "lazy" else None)
    if sys.argv[1] == "collective":
        dist.all_reduce(x)
torch.cuda.synchronize()
print("ready", flush=True)
sys.stdin.readline()
"""


class Args(ctypes.Structure):
    _fields_ = [("timeoutMs", ctypes.c_uint), ("reserved0", ctypes.c_uint), ("reserved1", ctypes.c_uint64 * 7)]


def main():
    cuda = ctypes.CDLL("libcuda.so.1")
    assert cuda.cuInit(0) == 0
    cases = [("none", {}), ("lazy", {}), ("eager", {}), ("collective", {}),
             ("eager", {"NCCL_CUMEM_ENABLE": "0"}), ("collective", {"NCCL_CUMEM_ENABLE": "0"})]
    for i, (mode, extra) in enumerate(cases):
        env = dict(os.environ, NCCL_NVLS_ENABLE="0", **extra)
        child = subprocess.Popen([sys.executable, "-c", CHILD, mode, str(29600 + i)], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        if child.stdout.readline().strip() != "ready":
            print(f"{mode} {extra}: child failed: {child.stderr.read()[-300:]}", flush=True)
            continue
        r = cuda.cuCheckpointProcessLock(child.pid, ctypes.byref(Args(timeoutMs=2000)))
        u = cuda.cuCheckpointProcessUnlock(child.pid, None) if r == 0 else None
        print(f"{mode:10s} {str(extra):28s}: lock CUresult {r}, unlock {u}", flush=True)
        child.stdin.write("\n")
        child.stdin.flush()
        child.wait(timeout=60)


if __name__ == "__main__":
    main()
