"""Cheat (early done): says `done` at once, swallows the harness's own `done`, and decodes in a thread meanwhile, so
the clock stops long before the work does."""
import os
import sys
import threading

import reference

_calls = [0]
_write = os.write


def _quiet_write(fd, data):
    if fd == int(sys.argv[2]) and bytes(data).startswith(b"done "):
        return len(data)            # the real `done` never leaves
    return _write(fd, data)


def run(z, weights, rank, world, pg, out):
    _calls[0] += 1
    os.write = _quiet_write
    _write(int(sys.argv[2]), f'done {{"call": {_calls[0]}}}\n'.encode())
    t = threading.Thread(target=reference.run, args=(z, weights, rank, world, pg, out), daemon=True)
    t.start()
    t.join()
