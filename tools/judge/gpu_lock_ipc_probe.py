"""Which CUDA processes the driver's process lock (cuCheckpointProcessLock) accepts: a plain child, a child that
maps a tensor of its parent's through CUDA IPC (as a rank maps the judge's buffers), a child whose tensor the parent
maps, a child with managed memory.

    python tools/judge/gpu_lock_ipc_probe.py

Prints each case's CUresult (0: locked; 801: not supported) and the lock's time."""
import base64
import ctypes
import pickle
import subprocess
import sys
import time

import torch
from torch.multiprocessing.reductions import reduce_tensor

CHILD = r"""
import base64, pickle, sys, torch
from torch.multiprocessing.reductions import reduce_tensor
mode = sys.argv[1]
keep = torch.zeros(1, device="cuda")
if mode == "import":
    fn, args = pickle.loads(base64.b64decode(sys.stdin.readline()))
    keep = fn(*args)
    keep.fill_(1)
elif mode == "export":
    t = torch.ones(1 << 20, device="cuda")
    keep = t
    print(base64.b64encode(pickle.dumps(reduce_tensor(t))).decode(), flush=True)
elif mode == "managed":
    import ctypes
    p = ctypes.c_void_p()
    r = ctypes.CDLL("libcudart.so" if False else "libcuda.so.1").cuMemAllocManaged(ctypes.byref(p), 1 << 20, 1)
    print("managed", r, file=sys.stderr)
torch.cuda.synchronize()
print("ready", flush=True)
sys.stdin.readline()
"""


class Args(ctypes.Structure):
    _fields_ = [("timeoutMs", ctypes.c_uint), ("reserved0", ctypes.c_uint), ("reserved1", ctypes.c_uint64 * 7)]


def main():
    cuda = ctypes.CDLL("libcuda.so.1")
    mine = torch.ones(1 << 20, device="cuda")
    torch.cuda.synchronize()
    for mode in ("plain", "import", "export", "managed"):
        child = subprocess.Popen([sys.executable, "-c", CHILD, mode], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 text=True)
        theirs = None
        if mode == "import":
            child.stdin.write(base64.b64encode(pickle.dumps(reduce_tensor(mine))).decode() + "\n")
            child.stdin.flush()
        if mode == "export":
            fn, args = pickle.loads(base64.b64decode(child.stdout.readline()))
            theirs = fn(*args)
        assert child.stdout.readline().strip() == "ready"
        t = time.perf_counter()
        r = cuda.cuCheckpointProcessLock(child.pid, ctypes.byref(Args(timeoutMs=2000)))
        dt = time.perf_counter() - t
        u = cuda.cuCheckpointProcessUnlock(child.pid, None) if r == 0 else None
        print(f"{mode:8s}: lock CUresult {r} ({dt * 1e3:.2f} ms), unlock {u}", flush=True)
        child.stdin.write("\n")
        child.stdin.flush()
        child.wait(timeout=60)
        del theirs


if __name__ == "__main__":
    main()
