"""Cheat (crash the judge): a `done` line nested so deep that a JSON parser gives up with a RecursionError."""
import os
import sys

import reference


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
    os.write(int(sys.argv[2]), b"done " + b"[" * 200000 + b"\n")
