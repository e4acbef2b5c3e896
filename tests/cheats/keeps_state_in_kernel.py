"""Cheat: state across processes in kernel state that Landlock's filesystem lock does not cover: an extended
attribute of its own file, a key in root's user keyring, the host's domain name. Each rank process marks them; a
process that finds another process's mark could replay what was kept there. It raises instead, so the test sees
whether a later process ever finds one: with the rank's capabilities dropped and metadata and keyring syscalls
refused (harness/isolation/seccomp.py), none does."""
import ctypes
import os

import reference

libc = ctypes.CDLL(None, use_errno=True)
ME = os.path.abspath(__file__)
TAG = str(os.getpid()).encode()


def _check(found):
    if found and found != TAG:
        raise RuntimeError(f"found state left by process {found.decode(errors='replace')}")


def _mark():
    try:
        _check(os.getxattr(ME, "user.wan_mark"))
    except OSError:
        pass
    try:
        os.setxattr(ME, "user.wan_mark", TAG)
    except OSError:
        pass
    key = libc.syscall(250, 10, -4, b"user", b"wan_mark", 0)          # keyctl SEARCH in the user keyring
    if key >= 0:
        buf = ctypes.create_string_buffer(64)
        n = libc.syscall(250, 11, key, buf, 64)                       # keyctl READ
        _check(buf.raw[:max(n, 0)])
    libc.syscall(248, b"user", b"wan_mark", TAG, len(TAG), -4)        # add_key
    name = ctypes.create_string_buffer(64)
    if libc.getdomainname(name, 64) == 0 and name.value.startswith(b"wan"):
        _check(name.value[3:])
    libc.setdomainname(b"wan" + TAG, 3 + len(TAG))


def prepare(weights, rank, world, pg):
    _mark()
    return weights


def run(z, weights, rank, world, pg, out):
    _mark()
    return reference.run(z, weights, rank, world, pg, out)
