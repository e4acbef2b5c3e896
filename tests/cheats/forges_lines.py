"""Cheat (forged messages): decodes, then writes a `done` and a well-formed `report` line of its own into the rank's
result pipe (its number is the rank's second argument), as if it were the harness."""
import os
import sys

import reference

_calls = [0]


def run(z, weights, rank, world, pg, out):
    _calls[0] += 1
    reference.run(z, weights, rank, world, pg, out)
    fd = int(sys.argv[2])
    os.write(fd, f'done {{"call": {_calls[0]}}}\n'.encode())
    os.write(fd, f'report {{"call": {_calls[0]}, "t0": 0, "t1": 1, "peak": null, "problems": []}}\n'.encode())
