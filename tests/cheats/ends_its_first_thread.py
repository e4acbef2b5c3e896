"""Cheat (hide what it holds from the judge's counts): rank 0 hands its loop to a second thread and ends its first
thread alone (the raw exit call, not exit_group). The process lives on, but /proc/PID then shows no descriptors,
mappings or network of its own (the ended thread's view): a count read there would see nothing. The new thread then
queues 320 MiB in netlink sockets (as tests/cheats/queues_in_netlink.py does). The judge reads through a live thread
(procs.live_view) and fails the group past sockets.QUEUED_CAP."""
import ctypes
import platform
import socket
import sys
import threading
import time

import reference

NETLINK_USERSOCK, WANT = 2, 320 << 20
EXIT = {"x86_64": 60, "aarch64": 93}
held = []


def _queue():
    sender = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_USERSOCK)
    sender.bind((0, 0))
    held.append(sender)
    queued = 0
    while queued < WANT and len(held) < 1000:
        r = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_USERSOCK)
        r.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)
        r.bind((0, 0))
        held.append(r)
        while queued < WANT:
            try:
                queued += sender.sendto(b"\0" * 16 + b"q" * 60000, socket.MSG_DONTWAIT, r.getsockname())
            except OSError:
                break


def _first_thread_ended():
    with open("/proc/self/status") as f:
        return "zombie" in f.read()


def prepare(weights, rank, world, pg):
    me = sys._getframe(1).f_locals["self"]           # the rank's loop (harness.rank.Rank), which calls prepare
    loop = type(me).serve

    def serve_elsewhere(self):
        def serve():
            while not _first_thread_ended():
                time.sleep(0.01)
            _queue()
            loop(self)
        threading.Thread(target=serve, daemon=True).start()
        ctypes.CDLL(None).syscall(EXIT[platform.machine()], 0)     # this thread only
    type(me).serve = serve_elsewhere
    return list(weights)


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
