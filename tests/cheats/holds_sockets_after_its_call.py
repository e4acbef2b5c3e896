"""Cheat (deny a neighbour's call the host's pools while its own group idles): after its call, a thread of the rank
(hidden from the rank's thread check, which is the solution's to change) opens more sockets than a group may hold
and keeps them. The judge counts what a group holds whenever it freezes it (between its calls): over a cap, the group
is killed at once and fails at its next call (tests/isolation/test_procs.py)."""
import socket
import sys
import threading

import reference

held = []


def _hold():
    try:
        for _ in range(2_100):
            held.extend(socket.socketpair())
    except OSError:
        pass


def prepare(weights, rank, world, pg):
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 10_000), hard))
    sys.modules["harness.rank.guards"].threads_left = lambda threads: []
    return list(weights)


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
    if not held:
        threading.Thread(target=_hold, daemon=True).start()
