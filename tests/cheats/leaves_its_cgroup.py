"""Cheat (out of the group's cgroup): starts a busy helper with clone3(CLONE_INTO_CGROUP) into the root cgroup (an
O_PATH-like handle on /sys/fs/cgroup needs no write right), in a new session, so neither the cgroup nor the process
group holds it. The rank's filter answers clone3 with ENOSYS; then it forks, as a cheat would, and the helper stays
in the cgroup."""
import ctypes
import os
import struct
import sys

import reference

_started = []
BUSY = "import time\nend = time.time() + 60\nwhile time.time() < end:\n    pass\n"


def _escape():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    for root in ("/sys/fs/cgroup/unified", "/sys/fs/cgroup"):
        try:
            fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
            break
        except OSError:
            fd = None
    if fd is None:
        return
    args = struct.pack("<11Q", 0x200000000, 0, 0, 0, 17, 0, 0, 0, 0, 0, fd)   # CLONE_INTO_CGROUP, SIGCHLD
    buf = ctypes.create_string_buffer(args, len(args))
    pid = libc.syscall(ctypes.c_long(435), buf, ctypes.c_long(len(args)))      # clone3
    if pid < 0:
        pid = os.fork()
    if pid == 0:
        os.setsid()
        os.execv(sys.executable, [sys.executable, "-c", BUSY])
    os.close(fd)


def run(z, weights, rank, world, pg, out):
    if rank == 0 and not _started:
        _started.append(1)
        _escape()
    reference.run(z, weights, rank, world, pg, out)
