"""Cheat (work that outlasts a freeze): decodes honestly, but after its first call a raw thread (`_thread`, which
`threading.enumerate` does not list) loops in a long system call (a read-only MAP_POPULATE of 256 GiB of address
space: zero pages, seconds of kernel time, little memory). A task stops for the cgroup freezer only on its way back
to user space, so the thread would work on beside another solution's call. The judge waits for the freeze to take
hold and fails the group at its next call when it does not within cgroup.FREEZE_S."""
import _thread
import ctypes
import platform
import threading
import time

import reference

SIZE = 256 << 30        # seconds of kernel time a call, well past cgroup.FREEZE_S
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_started = []


def _idle(tid):
    """The main thread waits for the judge's next command (in read, asleep): this call's done and report are out."""
    try:
        with open(f"/proc/self/task/{tid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        with open(f"/proc/self/task/{tid}/syscall") as f:
            nr = f.read().split()[0]
    except (OSError, IndexError):
        return False
    return state == "S" and nr == ("63" if platform.machine() == "aarch64" else "0")


def _spin(tid):
    while not _idle(tid):         # the populate holds the process's memory map: not while the rank still reports
        time.sleep(0.005)
    while True:
        p = _libc.mmap(None, SIZE, 1, 0x22 | 0x8000, -1, 0)      # PROT_READ, MAP_PRIVATE|ANONYMOUS|POPULATE
        _libc.munmap(p, SIZE)


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
    if not _started:
        _started.append(1)
        _thread.start_new_thread(_spin, (threading.get_native_id(),))
