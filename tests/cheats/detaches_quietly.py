"""Cheat (a helper that outlives the call and hides where it came from): a daemon started through a double fork in
a new session with an empty environment, so nothing in it names the group that started it."""
import subprocess
import sys

import reference

_started = []


def run(z, weights, rank, world, pg, out):
    if rank == 0 and not _started:
        _started.append(subprocess.Popen(
            [sys.executable, "-c", "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(300)"],
            env={}, start_new_session=True))
    reference.run(z, weights, rank, world, pg, out)
