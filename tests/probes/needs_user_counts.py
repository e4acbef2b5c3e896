"""A probe, not a solution to time: the reference decode, failing where its user's pending signals are spent (by
tests/cheats/spends_user_counts.py, beside it in one run, where both groups run as one user)."""
import signal
import threading

import reference


def _queue_one():
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGRTMIN})
    try:
        signal.pthread_kill(threading.get_ident(), signal.SIGRTMIN)
    except OSError as e:
        raise RuntimeError(f"pending signals refused: its user's count is spent ({e})") from e
    signal.sigtimedwait({signal.SIGRTMIN}, 0)


def prepare(weights, rank, world, pg):
    _queue_one()
    return list(weights)


def run(z, weights, rank, world, pg, out):
    _queue_one()
    reference.run(z, weights, rank, world, pg, out)
