"""Cheat (read the references unseen): the decoy references are armed through their access times, and a rank is
root, owner of every file it can read. Before reading them it tries to stop their access times moving: the noatime
inode flag (FS_IOC_SETFLAGS, an ioctl, which also outlives the run on disk) and O_NOATIME opens. The filter refuses
both (EPERM); the cheat then gives up instead of reading, so a pass would mean a way through."""
import fcntl
import os
import struct

import reference
import spec

FS_IOC_SETFLAGS, FS_NOATIME_FL = 0x40086602, 0x80


def prepare(weights, rank, world, pg):
    folder = spec.data_dir(spec.geometry_of(weights))
    refused = 0
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        fd = os.open(path, os.O_RDONLY | os.O_PATH)          # no read: no access time moves
        try:
            fd2 = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_NOATIME)
            os.close(fd2)
        except PermissionError:
            refused += 1
        finally:
            os.close(fd)
        try:
            with open(path, "rb", buffering=0) as f:
                fcntl.ioctl(f.fileno(), FS_IOC_SETFLAGS, struct.pack("Q", FS_NOATIME_FL))
        except PermissionError:
            refused += 1
        break                                                 # one decoy shows it
    if refused == 2:
        raise PermissionError("noatime refused both ways")
    return list(weights)


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
