"""Cheat (the host's socket pool, past the count of descriptors): connections a listener never accepts are whole
sockets, with their data, that no descriptor names; prepare queues 4,400 of them on two listeners and closes the
clients. In a network namespace of the group's own the judge counts every socket there (its sockstat), and fails
the group past disk.SOCKETS_CAP."""
import socket

import reference

held = []


def prepare(weights, rank, world, pg):
    for _ in range(2):
        lst = socket.socket()
        lst.bind(("127.0.0.1", 0))
        lst.listen(4096)
        held.append(lst)
        for _ in range(2_200):
            c = socket.create_connection(lst.getsockname())
            c.sendall(b"x" * 1024)
            c.close()
    return list(weights)


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
