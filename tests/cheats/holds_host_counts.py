"""Cheat (deny the solutions beside it what the kernel keeps for the whole host, every user's): Linux AIO contexts
(fs.aio-max-nr) and sockets, whose buffers come from one pool (tcp_mem; open files too, fs.file-max). prepare asks
for an AIO context, which the filter refuses (EPERM), then holds more sockets than the judge allows a group
(harness/isolation/disk.py's SOCKETS_CAP): the judge counts them once the ranks are ready, before another group
starts."""
import ctypes
import platform
import resource
import socket

import reference

IO_SETUP = {"x86_64": 206, "aarch64": 0}
held = []


def prepare(weights, rank, world, pg):
    libc = ctypes.CDLL(None, use_errno=True)
    ctx = ctypes.c_ulong(0)
    if libc.syscall(IO_SETUP[platform.machine()], 64, ctypes.byref(ctx)) == 0 or ctypes.get_errno() != 1:
        raise RuntimeError(f"io_setup allowed (errno {ctypes.get_errno()})")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 10_000), hard))
    try:
        for _ in range(2_100):
            held.extend(socket.socketpair())
    except OSError:
        pass
    return list(weights)


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
