"""Cheat (crash the judge): a line nested so deep that a JSON parser gives up with a RecursionError (a `report`: a
`done` that long is refused for its length before it is parsed)."""
import os
import sys

import reference


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
    os.write(int(sys.argv[2]), b"report " + b"[" * 200000 + b"\n")
