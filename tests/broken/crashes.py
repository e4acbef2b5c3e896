"""Broken: the process dies in the middle of a call."""
import os


def run(z, weights, rank, world, pg, out):
    os._exit(3)
