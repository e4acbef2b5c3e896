"""Which part of a rank's confinement makes the driver's process lock (cuCheckpointProcessLock) refuse it: a child
confined by one step of the rank's lockdown at a time (harness/isolation/seccomp.py, harness/isolation/ipc.py,
harness/isolation/landlock.py), then by all of them, starts CUDA and waits; the parent locks it.

    python tools/judge/gpu_lock_sandbox_probe.py

Prints each case's CUresult (0: locked; 801: not supported)."""
import ctypes
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = r"""
import glob, os, sys
sys.path.insert(0, sys.argv[1])
from harness.isolation import ipc, landlock, seccomp
steps = sys.argv[2].split(",")
if "net" in steps:
    seccomp._libc.unshare(0x40000000)
if "ipc" in steps:
    ipc.private_namespace()
if "caps" in steps:
    seccomp.drop_capabilities()
if "seccomp" in steps:
    seccomp.deny(metadata=True)
if "landlock" in steps:
    nodes = sorted(glob.glob("/dev/nvidia*"))
    landlock.lock(read=landlock.allowed_reads(), write=["/dev/shm", f"/proc/{os.getpid()}/task"],
                  devices=["/dev/null", "/dev/zero", "/dev/urandom"] + nodes)
if "landlock_proc" in steps:       # /proc and /dev wholly readable and writable: is it a path the driver needs?
    landlock.lock(read=landlock.allowed_reads() + ["/proc"], write=["/dev/shm", "/tmp", f"/proc/{os.getpid()}/task"],
                  devices=["/dev"], scope_signals=False)
if "landlock_nosignal" in steps:   # the rank's paths, signals not scoped
    nodes = sorted(glob.glob("/dev/nvidia*"))
    landlock.lock(read=landlock.allowed_reads(), write=["/dev/shm", f"/proc/{os.getpid()}/task"],
                  devices=["/dev/null", "/dev/zero", "/dev/urandom"] + nodes, scope_signals=False)
import torch
x = torch.ones(1 << 20, device="cuda")
torch.cuda.synchronize()
print("ready", flush=True)
sys.stdin.readline()
"""


class Args(ctypes.Structure):
    _fields_ = [("timeoutMs", ctypes.c_uint), ("reserved0", ctypes.c_uint), ("reserved1", ctypes.c_uint64 * 7)]


def main():
    cuda = ctypes.CDLL("libcuda.so.1")
    assert cuda.cuInit(0) == 0
    for steps in ("none", "net", "ipc", "caps", "seccomp", "landlock", "landlock_nosignal", "landlock_proc",
                  "net,ipc,caps,seccomp,landlock"):
        child = subprocess.Popen([sys.executable, "-c", CHILD, ROOT, steps], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = child.stdout.readline().strip()
        if line != "ready":
            print(f"{steps:32s}: child failed: {child.stderr.read()[-300:]}", flush=True)
            continue
        r = cuda.cuCheckpointProcessLock(child.pid, ctypes.byref(Args(timeoutMs=2000)))
        u = cuda.cuCheckpointProcessUnlock(child.pid, None) if r == 0 else None
        print(f"{steps:32s}: lock CUresult {r}, unlock {u}", flush=True)
        child.stdin.write("\n")
        child.stdin.flush()
        child.wait(timeout=60)


if __name__ == "__main__":
    main()
