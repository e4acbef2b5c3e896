"""Cheat (stop or kill the judge): the judge and the ranks run as the same user, so without Landlock's signal scope
(ABI >= 6) a rank could send it SIGSTOP (a hung harness) or SIGKILL (no verdict at all). Here SIGCONT, harmless
if it got through, stands for them, by pid and by pidfd: each is refused (PermissionError)."""
import os
import signal

import reference


def prepare(weights, rank, world, pg):
    judge = os.getppid()
    refused = []
    for send in (lambda: os.kill(judge, signal.SIGCONT),
                 lambda: signal.pidfd_send_signal(os.pidfd_open(judge), signal.SIGCONT)):
        try:
            send()
        except PermissionError:
            refused.append(True)
    if len(refused) != 2:
        return list(weights)      # a signal reached the judge: the cheat passes, and the test fails
    raise PermissionError("both signals to the judge refused")


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
