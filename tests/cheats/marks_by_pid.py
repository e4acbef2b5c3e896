"""Cheat (telling the stored calls from fresh ones across groups): at world 1 a group learns the stored latents from
its repeat (latents it saw before) and leaves three bits of their checksum in the host's pid counter, starting
threads until the next pid falls in the matching eighth of pid_max; the next world's group, started a few pids later,
reads the bits from its own pid. There it decodes exactly only the call whose latents match them and, standing in for
a cheaper decode, leaves its other calls' videos a little wrong: where only the stored calls were held to the task's
rule (bench on GPUs), those would pass. The gate holds every call to it."""
import os
import threading
import zlib

import torch

import reference

BITS = 3
_seen = set()


def _eighth():
    with open("/proc/sys/kernel/pid_max") as f:
        return int(f.read()) >> BITS


def _bits(z):
    return zlib.crc32(z.contiguous().view(torch.int16).numpy().tobytes()) & ((1 << BITS) - 1)


_left = os.getpid() // _eighth()        # what the group before this one left


def _leave(bits):
    for _ in range(1 << 20):
        t = threading.Thread(target=lambda: None)
        t.start()
        t.join()
        if t.native_id // _eighth() == bits:
            return


def run(z, weights, rank, world, pg, out):
    key = zlib.crc32(z.contiguous().view(torch.int16).numpy().tobytes())
    repeat, _ = key in _seen, _seen.add(key)
    reference.run(z, weights, rank, world, pg, out)
    if world == 1 and repeat and rank == 0:
        _leave(_bits(z))
    elif world > 1 and rank == 0 and _bits(z) != _left:
        out.add_(0.02).clamp_(-1, 1)
