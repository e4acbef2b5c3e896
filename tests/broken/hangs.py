"""Broken: never returns."""
import time


def run(z, weights, rank, world, pg, out):
    while True:
        time.sleep(1)
