"""Cheat (deny the solutions beside it the host's memory): prepare queues 320 MiB in the receive queues of netlink
sockets (NETLINK_USERSOCK, each raised to net.core.rmem_max), kernel memory that no memory cgroup is charged for,
and keeps them unread. The judge reads every socket's queues in the group's network namespace
(harness/isolation/sockets.py) once the ranks are ready, before another group starts, and fails the group past
sockets.QUEUED_CAP."""
import socket

import reference

NETLINK_USERSOCK, WANT = 2, 320 << 20
held = []


def prepare(weights, rank, world, pg):
    sender = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_USERSOCK)
    sender.bind((0, 0))
    held.append(sender)
    queued = 0
    while queued < WANT and len(held) < 1000:
        r = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_USERSOCK)
        r.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)      # the kernel holds it to rmem_max
        r.bind((0, 0))
        held.append(r)
        while queued < WANT:
            try:
                queued += sender.sendto(b"\0" * 16 + b"q" * 60000, socket.MSG_DONTWAIT, r.getsockname())
            except OSError:       # this one's queue is full
                break
    return list(weights)


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
