"""Can the judge hold another process's GPU work out of a call? The CUDA driver's process lock
(cuCheckpointProcessLock: blocks the process's further CUDA calls and completes the work it already submitted),
called from a parent on a child that queues GPU work and returns without waiting for it.

    python tools/judge/gpu_lock_probe.py

Prints: the lock and unlock times of an idle child; a lock with a short timeout while the child has seconds of work
queued (its result and time); the parent's own matmuls timed beside a child's queued work, with and without a lock
taken first; a lock of a stopped (SIGSTOP) child."""
import ctypes
import os
import signal
import statistics
import subprocess
import sys
import time

import torch

CHILD = r"""
import sys, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.empty_like(a)
torch.cuda.synchronize()
print("ready", flush=True)
for line in sys.stdin:
    cmd, n = line.split()
    n = int(n)
    if cmd == "burst":            # n matmuls queued, not waited for
        for _ in range(n):
            torch.mm(a, a, out=b)
        print("queued", flush=True)
    elif cmd == "sync":
        torch.cuda.synchronize()
        print("synced", flush=True)
"""


class Args(ctypes.Structure):
    _fields_ = [("timeoutMs", ctypes.c_uint), ("reserved0", ctypes.c_uint), ("reserved1", ctypes.c_uint64 * 7)]


def main():
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    cuda = ctypes.CDLL("libcuda.so.1")
    ver = ctypes.c_int()
    cuda.cuDriverGetVersion(ctypes.byref(ver))
    print(f"driver API {ver.value}, torch {torch.__version__}, {torch.cuda.get_device_name()}")
    lock, unlock, state = cuda.cuCheckpointProcessLock, cuda.cuCheckpointProcessUnlock, cuda.cuCheckpointProcessGetState

    def do_lock(pid, ms):
        a = Args(timeoutMs=ms)
        t = time.perf_counter()
        r = lock(pid, ctypes.byref(a))
        return r, time.perf_counter() - t

    def do_unlock(pid):
        t = time.perf_counter()
        r = unlock(pid, None)
        return r, time.perf_counter() - t

    def get_state(pid):
        s = ctypes.c_int(-1)
        r = state(pid, ctypes.byref(s))
        return r, s.value

    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "ready"

    def tell(cmd):
        child.stdin.write(cmd + "\n")
        child.stdin.flush()
        return child.stdout.readline().strip()

    # one 8192^3 bf16 matmul: about 1.1 TFLOP, ~1.5 ms on an H200
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.empty_like(a)

    def mine(n=100):
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(n):
            torch.mm(a, a, out=b)
        torch.cuda.synchronize()
        return time.perf_counter() - t

    mine(20)
    print(f"state of the idle child: {get_state(child.pid)}")
    locks, unlocks = [], []
    for _ in range(20):
        r, t = do_lock(child.pid, 2000)
        assert r == 0, f"lock: CUresult {r}"
        locks.append(t)
        r, t = do_unlock(child.pid)
        assert r == 0, f"unlock: CUresult {r}"
        unlocks.append(t)
    print(f"idle child: lock median {statistics.median(locks) * 1e3:.3f} ms (max {max(locks) * 1e3:.3f}), "
          f"unlock median {statistics.median(unlocks) * 1e3:.3f} ms (max {max(unlocks) * 1e3:.3f})")

    alone = [mine() for _ in range(5)]
    print(f"parent's 100 matmuls alone: {statistics.median(alone) * 1e3:.1f} ms")

    tell("burst 1000")
    t_beside = mine()
    tell("sync 0")
    print(f"parent's 100 matmuls beside a child's 1000 queued: {t_beside * 1e3:.1f} ms")

    tell("burst 1000")
    r, t = do_lock(child.pid, 200)
    print(f"lock with 200 ms timeout, 1000 matmuls queued: CUresult {r} after {t * 1e3:.1f} ms; "
          f"state {get_state(child.pid)}")
    if r == 0:
        do_unlock(child.pid)
    r, t = do_lock(child.pid, 10000)
    print(f"lock with 10 s timeout right after: CUresult {r} after {t * 1e3:.1f} ms; state {get_state(child.pid)}")
    t_locked = mine()
    print(f"parent's 100 matmuls with the child locked: {t_locked * 1e3:.1f} ms")
    if r == 0:
        r, t = do_unlock(child.pid)
        print(f"unlock: CUresult {r} after {t * 1e3:.1f} ms")
    tell("sync 0")

    os.kill(child.pid, signal.SIGSTOP)
    time.sleep(0.1)
    r, t = do_lock(child.pid, 1000)
    print(f"lock of a stopped child, 1 s timeout: CUresult {r} after {t * 1e3:.1f} ms; state {get_state(child.pid)}")
    os.kill(child.pid, signal.SIGCONT)
    if r == 0:
        os.kill(child.pid, signal.SIGSTOP)
        r2, t2 = do_unlock(child.pid)
        print(f"unlock of the stopped child: CUresult {r2} after {t2 * 1e3:.1f} ms")
        os.kill(child.pid, signal.SIGCONT)
    # lock first, then stop, then continue, then unlock: the order a freeze would use
    r, t = do_lock(child.pid, 1000)
    os.kill(child.pid, signal.SIGSTOP)
    time.sleep(0.05)
    os.kill(child.pid, signal.SIGCONT)
    r2, t2 = do_unlock(child.pid)
    print(f"lock, stop, continue, unlock: {r} ({t * 1e3:.3f} ms), {r2} ({t2 * 1e3:.3f} ms)")
    print(f"child still works: {tell('burst 10')}, {tell('sync 0')}")
    child.stdin.close()
    child.wait(timeout=30)


if __name__ == "__main__":
    main()
