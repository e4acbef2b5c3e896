"""Cheat (stall the judge): writes a line of many megabytes, never ending it."""
import os
import sys
import time


def run(z, weights, rank, world, pg, out):
    chunk = b"x" * (1 << 20)
    for _ in range(64):
        os.write(int(sys.argv[2]), chunk)
    time.sleep(600)
