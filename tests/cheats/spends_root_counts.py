"""Cheat (deny root's other processes, a neighbour's ranks among them): every rank is root, and the kernel keeps some
counts per user. Pipe buffers grown past the default (past the per-user soft limit other capless processes get
2-page pipes) and POSIX message queues (RLIMIT_MSGQUEUE's bytes) are taken in prepare and held; the filter refuses
both (EPERM), and the cheat then says so."""
import ctypes
import fcntl
import os
import platform

import reference

F_SETPIPE_SZ = 1031
MQ_OPEN = {"x86_64": 240, "aarch64": 180}
held = []


def prepare(weights, rank, world, pg):
    refused = []
    r, w = os.pipe()
    held.extend((r, w))
    try:
        fcntl.fcntl(w, F_SETPIPE_SZ, 1 << 20)
    except PermissionError:
        refused.append("F_SETPIPE_SZ")
    libc = ctypes.CDLL(None, use_errno=True)
    name = f"/wan-cheat-{os.getpid()}".encode()
    if libc.syscall(MQ_OPEN[platform.machine()], name, os.O_CREAT | os.O_RDWR, 0o600, None) < 0:
        if ctypes.get_errno() == 1:
            refused.append("mq_open")
    else:
        libc.syscall(MQ_OPEN[platform.machine()] + 1, name)     # mq_unlink: the name, not the count, is the point
    if len(refused) == 2:
        raise RuntimeError("root's per-user counts refused: " + ", ".join(refused))
    return list(weights)


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
