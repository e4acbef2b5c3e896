"""Cheat (hide what it holds from the judge's counts): rank 0 hands its loop to a second thread and ends its first
thread alone (the raw exit call, not exit_group). The process lives on, but /proc/PID then shows no descriptors,
mappings or network of its own (the ended thread's view): a count read there would see nothing. The new thread then
queues 320 MiB in UDP sockets' receive queues, unread. The judge reads through a live thread
(procs.live_view) and fails the group past sockets.QUEUED_CAP."""
import ctypes
import platform
import socket
import sys
import threading
import time

import reference

WANT = 320 << 20
EXIT = {"x86_64": 60, "aarch64": 93}
held = []


def _queue():
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    held.append(sender)
    queued = 0
    while queued < WANT and len(held) < 1000:
        r = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        r.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)      # the kernel holds it to rmem_max
        r.bind(("127.0.0.1", 0))
        held.append(r)
        before = queued
        while queued < WANT and queued - before < (64 << 20):
            sender.sendto(b"u" * 60000, r.getsockname())        # past a full queue the kernel drops, silently
            queued += 60000
        queued = before + min(queued - before, r.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) // 2)


def _first_thread_ended():
    with open("/proc/self/status") as f:
        return "zombie" in f.read()


def prepare(weights, rank, world, pg):
    me = sys._getframe(1).f_locals["self"]           # the rank's loop (harness.rank.worker.Rank), which calls prepare
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
