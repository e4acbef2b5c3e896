"""Cheat (deny the solutions after it): the kernel keeps some counts per user, and a group that runs as the judge's
user spends them for every other process of that user. Here the pending signals (RLIMIT_SIGPENDING: past them
`timer_create` and every queued signal fail): prepare queues real-time signals to a thread that blocks them until
the kernel refuses one, and holds them while its group lives. Under a user of its own (harness/isolation/users.py) the
count is its group's: tests/probes/needs_user_counts.py, beside it in one run, still queues its signal."""
import signal
import threading

import reference

held = 0


def prepare(weights, rank, world, pg):
    global held
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGRTMIN})
    me = threading.get_ident()
    while True:
        try:
            signal.pthread_kill(me, signal.SIGRTMIN)
        except OSError:     # EAGAIN: the user's count is spent
            break
        held += 1
        if held > 1 << 22:
            break
    return list(weights)


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
