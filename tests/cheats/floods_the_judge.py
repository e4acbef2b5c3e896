"""Cheat (the judge's memory): at world 2, once rank 0's done and report are sent, a thread of rank 0 writes short,
well-formed lines into its result pipe while rank 1 holds the call open; a judge that read them all would hold
every byte (capped here at 256 MiB)."""
import os
import sys
import threading
import time

import reference

LINE = b"x {}\n" * (1 << 14)


def _flood(fd):
    time.sleep(0.3)             # after the rank's own done and report
    sent = 0
    while sent < 256 << 20:
        sent += os.write(fd, LINE)


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
    if rank == 0:
        threading.Thread(target=_flood, args=(int(sys.argv[2]),), daemon=True).start()
    else:
        time.sleep(8)
