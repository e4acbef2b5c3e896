"""Cheat (crash the judge): a `report` nested 700 deep, which Python's json still parses but a recursive walk of it
(making its strings plain, printing it, writing it as JSON) may not; 200,000 deep, json itself gives up with a
RecursionError. A `done` that long is refused for its length before it is parsed."""
import os
import sys

import reference

DEPTH = 700


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
    os.write(int(sys.argv[2]), b"report " + b'{"a": ' * DEPTH + b"1" + b"}" * DEPTH + b"\n")
