"""Cheat (exploit 6/17, work in another process): leaves a helper process running after the call."""
import subprocess
import sys

import reference

_helpers = []


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
    _helpers.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]))
