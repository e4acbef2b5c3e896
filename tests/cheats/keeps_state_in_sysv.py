"""Cheat: state across processes in System V shared memory (no file: Landlock does not see it). Each rank process
marks a segment under a fixed key when it prepares; a process that finds another process's mark could replay
videos kept there. It raises instead, so the test sees whether a later process ever finds one: with a private IPC
namespace per rank (CPU) and the judge removing what a group made (everywhere), none does."""
import ctypes
import os

import reference

IPC_CREAT = 0o1000
KEY = 0x5741_4E32
libc = ctypes.CDLL(None, use_errno=True)
libc.shmget.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int]
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
libc.shmat.restype = ctypes.c_void_p


def _mark():
    found = libc.shmget(KEY, 0, 0)
    if found >= 0:
        addr = libc.shmat(found, None, 0)
        other = ctypes.c_int64.from_address(addr).value
        if other != os.getpid():
            raise RuntimeError(f"found state left by process {other}")
        return
    seg = libc.shmget(KEY, 4096, IPC_CREAT | 0o600)
    addr = libc.shmat(seg, None, 0)
    ctypes.c_int64.from_address(addr).value = os.getpid()


def prepare(weights, rank, world, pg):
    _mark()
    return weights


def run(z, weights, rank, world, pg, out):
    _mark()
    return reference.run(z, weights, rank, world, pg, out)
