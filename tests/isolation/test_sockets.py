"""harness/isolation/sockets.py against sockets this test holds: the bytes queued in them, read from /proc, and the
sockets a process holds (a group in the host's network namespace is judged by those alone)."""
import os
import socket

from harness.isolation import sockets


def test_queued_bytes_are_counted_per_socket_kind():
    pid = os.getpid()
    before = sockets.queued(pid, sockets.held([pid]))
    udp_in, udp_out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM), socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    nl_in = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 2)     # NETLINK_USERSOCK
    nl_out = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 2)
    try:
        udp_in.bind(("127.0.0.1", 0))
        for _ in range(8):
            udp_out.sendto(b"u" * 8000, udp_in.getsockname())
        nl_in.bind((0, 0))
        nl_out.bind((0, 0))
        for _ in range(8):
            nl_out.sendto(b"\0" * 16 + b"n" * 8000, nl_in.getsockname())
        mine = sockets.held([pid])
        assert {os.fstat(s.fileno()).st_ino for s in (udp_in, nl_in)} <= mine
        # Unread: at least the payloads (the kernel counts each buffer's whole size, more than its payload).
        assert sockets.queued(pid, {os.fstat(udp_in.fileno()).st_ino}) >= 8 * 8000
        assert sockets.queued(pid, {os.fstat(nl_in.fileno()).st_ino}) >= 8 * 8016
        assert sockets.queued(pid, mine) - before >= 2 * 8 * 8000
        assert sockets.queued(pid, set()) == 0
        for _ in range(8):              # read: no longer queued
            udp_in.recv(8000)
        assert sockets.queued(pid, {os.fstat(udp_in.fileno()).st_ino}) < 8000
    finally:
        for s in (udp_in, udp_out, nl_in, nl_out):
            s.close()


def test_the_namespace_count_sees_every_socket():
    pid = os.getpid()
    used = sockets.in_namespace(pid)
    pair = socket.socketpair()
    try:
        assert used is not None and sockets.in_namespace(pid) >= used + 2
    finally:
        for s in pair:
            s.close()
