"""Cheat (writes the repository): leaves a module beside spec.py, which later runs (and the grader) would import."""
import os

import reference

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(z, weights, rank, world, pg, out):
    with open(os.path.join(ROOT, "planted.py"), "w") as f:
        f.write("# planted\n")
    reference.run(z, weights, rank, world, pg, out)
