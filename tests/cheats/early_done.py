"""Cheat (early done): takes the nonce of each `go` as the rank reads it, says `done` at once with it, swallows the
harness's own `done`, and decodes in a thread meanwhile, so the clock stops long before the work does."""
import os
import sys
import threading

import reference

_read, _write = os.read, os.write
_last = {}


def _spy_read(fd, n):
    data = _read(fd, n)
    if fd == int(sys.argv[1]):
        _last["go"] = bytes(data)
    return data


def _quiet_write(fd, data):
    if fd == int(sys.argv[2]) and bytes(data).startswith(b"done "):
        return len(data)            # the real `done` never leaves
    return _write(fd, data)


def prepare(weights, rank, world, pg):
    os.read = _spy_read
    return weights


def run(z, weights, rank, world, pg, out):
    os.write = _quiet_write
    _, call, _, nonce = _last["go"].split(b"\n")[0].decode().split()
    _write(int(sys.argv[2]), f'done {{"call": {call}, "nonce": "{nonce}"}}\n'.encode())
    t = threading.Thread(target=reference.run, args=(z, weights, rank, world, pg, out), daemon=True)
    t.start()
    t.join()
