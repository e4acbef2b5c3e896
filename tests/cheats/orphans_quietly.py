"""Cheat (a helper that leaves no trace of its group, where the judge has no cgroup): in prepare a child double-forks,
leaves the session and execs with an empty environment (no MASTER_PORT, the only mark a process of a group carries
without a cgroup), then waits. The park after prepare takes any orphan below the judge for the parked group's: only
that group ran since the last park, which killed every orphan it found."""
import os
import sys

import reference


def prepare(weights, rank, world, pg):
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            os.execve(sys.executable, [sys.executable, "-c", "import time; time.sleep(120)"], {})
        os._exit(0)
    os.waitpid(pid, 0)
    return weights


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
