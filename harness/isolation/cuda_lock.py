"""A group's GPU work held to its calls.

Freezing a group (SIGSTOP, the cgroup freezer) stops its threads, not the GPU work they queued: a rank could
answer `done` with seconds of kernels queued behind it (from a thread of its own, after the rank's synchronise) and
they would run beside the next solution's call, slowing it (on one H200, 100 matmuls took 377 ms beside another
process's queued ones, 161 ms alone: `tools/judge/gpu_lock_probe.py`). So between its calls each rank's CUDA
is held by the driver's process lock (cuCheckpointProcessLock, CUDA 12.8+ drivers), which first completes the work
the process submitted, then blocks its further CUDA calls until the judge unlocks it just before the rank's next
`go`. Work still queued HOLD_S after a call is the rank's tampering. The driver refuses to lock a process with
CUPTI loaded (CUresult 801), so a profiled group's ranks are not held (the judge does not ask); any other rank whose
lock is refused, for that or any reason, could queue work between its calls that runs beside another solution's:
tampering (tests/cheats_gpu/loads_cupti.py).

A lock of a process that has stopped itself does not return, its timeout or not, so the judge asks a helper
process of its own (`python -m harness.isolation.cuda_lock`, which only loads the driver) and waits with a deadline; a
helper that does not answer is killed and replaced."""
import ctypes
import os
import select
import subprocess
import sys
import time

from harness.isolation import procs

HOLD_S = 1.0          # a rank's queued GPU work must be done this long after its call (an honest rank's: none; what
                      # it queued runs before the next call, on a GPU it heats)
ANSWER_S = 10.0       # beyond the lock's own timeout: a helper that has not answered is stuck
START_S = 60.0
NOT_READY = 600       # CUDA_ERROR_NOT_READY: the lock's timeout passed with work still running
CUPTI = 801           # CUDA_ERROR_NOT_SUPPORTED: the answer to a lock of a process with CUPTI loaded


class _LockArgs(ctypes.Structure):
    _fields_ = [("timeoutMs", ctypes.c_uint), ("reserved0", ctypes.c_uint), ("reserved1", ctypes.c_uint64 * 7)]


def serve():
    """The helper: `lock PID MS` and `unlock PID` on standard input, each answered by the driver's CUresult."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        lock, unlock = cuda.cuCheckpointProcessLock, cuda.cuCheckpointProcessUnlock
        r = cuda.cuInit(0)
        if r:
            raise OSError(f"cuInit returned CUresult {r}")
    except (OSError, AttributeError) as e:
        print(f"unsupported {type(e).__name__}: {str(e)[:200]}", flush=True)
        return
    print("ready", flush=True)
    for line in sys.stdin:
        verb, pid, *ms = line.split()
        if verb == "lock":
            r = lock(int(pid), ctypes.byref(_LockArgs(timeoutMs=int(ms[0]))))
        else:
            r = unlock(int(pid), None)
        print(r, flush=True)


class CudaLock:
    """The judge's side: one helper for the run, started on first use."""

    def __init__(self, command=None):
        """command: the helper's command line (a test's stand-in); default `python -m harness.isolation.cuda_lock`."""
        self.command = command or [sys.executable, "-m", "harness.isolation.cuda_lock"]
        self.proc, self.unsupported, self.locked = None, None, set()

    def start(self):
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        procs.mark_judge()      # inherited: the helper is the judge's, never taken for a rank's
        self.proc = subprocess.Popen(self.command, cwd=root, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        first = self._line(START_S)
        if first != "ready":
            self.unsupported = first.removeprefix("unsupported ") if first else "its helper did not start"
            self.close()

    def _line(self, limit):
        """The helper's next line, or None (killed) when none came within `limit` seconds."""
        fd, buf, deadline = self.proc.stdout.fileno(), b"", time.monotonic() + limit
        while not buf.endswith(b"\n"):
            left = deadline - time.monotonic()
            ready = select.select([fd], [], [], max(0.0, left))[0] if left > 0 else []
            chunk = os.read(fd, 4096) if ready else b""
            if not chunk:
                self.close()
                return None
            buf += chunk
        return buf.decode(errors="replace").strip()

    def _ask(self, line, limit):
        if self.proc is None and self.unsupported is None:
            self.start()
        if self.proc is None:
            return None
        try:
            self.proc.stdin.write(line.encode())
            self.proc.stdin.flush()
        except OSError:
            self.close()
            return None
        answer = self._line(limit)
        return int(answer) if answer is not None and answer.lstrip("-").isdigit() else None

    def hold(self, pids, seconds=HOLD_S):
        """Lock each pid's CUDA once its queued work is done; None, or (index, why) of the first whose work was
        still running after `seconds`, whose lock did not return or was refused (CUPTI loaded: the caller asks for
        no hold where the profiler runs)."""
        for i, pid in enumerate(pids):
            if procs.state(f"/proc/{pid}") in ("t", "T"):      # the judge has not frozen it: it stopped itself
                self.locked -= set(pids)
                return i, "it stopped itself after its call (a lock of a stopped process does not return)"
            r = self._ask(f"lock {pid} {int(seconds * 1000)}\n", seconds + ANSWER_S)
            if self.unsupported:
                return None
            if r in (NOT_READY, None):
                self.locked -= set(pids)      # the group is ended: its pids are no longer held
                return i, (f"GPU work still running {seconds:g} s after its call (the driver's lock timed out)"
                           if r == NOT_READY else
                           "the driver's lock of its CUDA did not return (a process that stops itself cannot be locked)")
            if r:
                self.locked -= set(pids)
                return i, (f"the driver refused to hold its CUDA between calls (CUresult {r}"
                           + (": CUPTI, the profiler's library, loaded outside a profiled run)" if r == CUPTI else ")"))
            self.locked.add(pid)
        return None

    def release(self, pids):
        """Unlock each pid this holds; None, or (index, why) of the first that failed."""
        for i, pid in enumerate(pids):
            if pid not in self.locked:
                continue
            self.locked.discard(pid)
            if not _running(pid):
                continue
            r = self._ask(f"unlock {pid}\n", ANSWER_S)
            if r is None or r:
                return i, f"the driver could not unlock its CUDA ({'no answer' if r is None else f'CUresult {r}'})"
        return None

    def describe(self):
        return "GPU work not held between calls (" + self.unsupported + ")" if self.unsupported else \
            "GPU work held to its calls"

    def close(self):
        if self.proc is not None:
            self.proc.kill()
            try:
                self.proc.wait(timeout=ANSWER_S)
            except subprocess.TimeoutExpired:       # stuck in the driver, beyond a kill: left, never waited on for ever
                pass
            for f in (self.proc.stdin, self.proc.stdout):
                f.close()
            self.proc = None


def _running(pid, limit=5.0):
    """Wait until pid is not stopped (a thaw takes effect shortly after it is asked): an unlock of a stopped
    process, like a lock, would not return. False when the process is gone."""
    deadline = time.monotonic() + limit
    while True:
        state = procs.state(f"/proc/{pid}")
        if state is None:
            return False
        if state not in "tT" or time.monotonic() > deadline:
            return True
        time.sleep(0.001)


if __name__ == "__main__":
    serve()
