"""Cheat (crash the judge): after decoding, truncates the memory behind out, so that the judge, reading its mapping,
dies of SIGBUS: through every descriptor of the judge's buffers the rank holds (Python's mmap keeps a copy of the
one it maps, and Landlock lets a descriptor opened before the lock truncate its file), and through the path its
mapping names."""
import os

import reference


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if "wan-out" in os.readlink(f"/proc/self/fd/{fd}"):
                held.append(int(fd))
        except OSError:
            pass
    if not held:
        raise RuntimeError("no descriptor of out found (the cheat's premise is gone)")
    for fd in held:
        os.ftruncate(fd, 0)
    with open("/proc/self/maps") as f:
        paths = {line.split(None, 5)[-1].strip() for line in f if "wan-out" in line}
    for path in paths:
        os.truncate(path, 0)
