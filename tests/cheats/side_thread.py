"""Cheat (exploit 6, work after the timer): returns at once and decodes in a background thread."""
import threading

import reference


def run(z, weights, rank, world, pg, out):
    if rank == 0:
        threading.Thread(target=reference.run, args=(z, weights, rank, world, pg, out), name="late-decode").start()
