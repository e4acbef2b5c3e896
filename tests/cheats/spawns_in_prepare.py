"""Cheat (work in another process, started in prepare): a helper process started in prepare that waits past the
judge's count after prepare and would then run (on a GPU: allocate and queue kernels, unheld) while the judge decodes
references and other groups run; run() ends it first thing, so no process is left after any call."""
import subprocess
import sys

import reference

_helpers = []


def prepare(weights, rank, world, pg):
    _helpers.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]))
    return weights


def run(z, weights, rank, world, pg, out):
    while _helpers:
        p = _helpers.pop()
        p.kill()
        p.wait()
    reference.run(z, weights, rank, world, pg, out)
