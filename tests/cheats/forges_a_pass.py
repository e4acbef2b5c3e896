"""Cheat (a forged verdict): at import, before any call, writes an `error` line whose status is "passed" into the
rank's result pipe (its number is the rank's second argument), then waits for ever."""
import os
import sys
import time

os.write(int(sys.argv[2]), b'error {"status": "passed", "error": "all good"}\n')
while True:
    time.sleep(1000)


def run(z, weights, rank, world, pg, out):
    pass
