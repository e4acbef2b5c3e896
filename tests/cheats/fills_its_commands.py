"""Cheat (hang the judge): in prepare, each rank opens a second, writing end of its own command pipe through
/proc (a magic link, which Landlock does not refuse for a pipe), fills the pipe and keeps the read end open unread, so
that the judge's first `go`, written into a full pipe, would never return."""
import os
import sys
import threading

import reference

_keep = []


def prepare(weights, rank, world, pg):
    cmd = int(sys.argv[1])
    w = None
    for path in (f"/proc/{os.getpid()}/task/{threading.get_native_id()}/fd/{cmd}", f"/proc/self/fd/{cmd}"):
        try:
            w = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            break
        except PermissionError:
            continue
    if w is None:
        raise PermissionError("no second write end of the command pipe")
    try:
        while True:
            os.write(w, b"x" * 4096)
    except BlockingIOError:
        pass
    idle_r, idle_w = os.pipe()
    _keep.extend([os.dup(cmd), idle_r, idle_w, w])     # the read end stays open: no EPIPE for the judge
    os.dup2(idle_r, cmd)                                 # the rank's own loop now waits on an idle pipe
    return weights


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
