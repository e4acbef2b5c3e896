"""Cheat (state past the filter): io_uring's operations (IORING_OP_FSETXATTR among them) reach the kernel without
their own syscall, so the seccomp filter, which refuses setxattr, never sees them: an extended attribute on a file
the rank can read (its own source, owned by root) would outlive the run. The filter makes io_uring_setup fail
(ENOSYS) before any ring exists."""
import ctypes
import os

import reference


def prepare(weights, rank, world, pg):
    libc = ctypes.CDLL(None, use_errno=True)
    params = ctypes.create_string_buffer(120)             # struct io_uring_params, zeroed
    ring = libc.syscall(425, 8, params)                   # io_uring_setup(8 entries)
    if ring < 0:
        raise OSError(ctypes.get_errno(), f"io_uring_setup refused: {os.strerror(ctypes.get_errno())}")
    os.close(ring)
    return list(weights)


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
