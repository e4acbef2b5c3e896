"""Cheat (hide files from the judge's counts): a thread of the rank takes a file table of its own
(unshare(CLONE_FILES), which needs no capability) and holds there 10 GiB in files in no folder, as
tests/cheats/holds_disk_in_no_folder.py does; the judge's count reads the process's table (/proc/PID/fd), not that
thread's. The filter refuses it (EPERM), and the cheat says so."""
import ctypes
import os
import threading

import reference

GIB, CLONE_FILES = 1 << 30, 0x400
held, outcome = [], []
_libc = ctypes.CDLL(None, use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]


def _hide():
    if _libc.unshare(CLONE_FILES) != 0:
        outcome.append(f"a file table of its own refused ({os.strerror(ctypes.get_errno())})")
        return
    for _ in range(5):
        fd = os.open(os.environ["TMPDIR"], os.O_TMPFILE | os.O_RDWR, 0o600)
        _libc.fallocate(fd, 1, 0, 2 * GIB)          # FALLOC_FL_KEEP_SIZE
        held.append(fd)
    outcome.append("held")
    threading.Event().wait()          # its table lives as long as this thread


def prepare(weights, rank, world, pg):
    threading.Thread(target=_hide, daemon=True).start()
    while not outcome:
        threading.Event().wait(0.01)
    if outcome[0] != "held":
        raise RuntimeError(outcome[0])
    return list(weights)


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
