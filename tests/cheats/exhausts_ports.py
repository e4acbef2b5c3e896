"""Cheat (deny the next solutions their rendezvous): prepare puts every ephemeral port of 127.0.0.1 in TIME_WAIT (bind
port 0, connect to its own listener, close the client side first), then the calls run honestly. Run it only in a
network namespace of its own (tests/judge/test_bench.py): it takes the machine's loopback ports for a minute. It stops
after SPEND_S too: in the rank's own network namespace (isolation) the range is the kernel's default, tens of
thousands of ports, and a bind near a full range can take long enough to time the start out."""
import socket
import time

import reference

SPEND_S = 20.0


def prepare(weights, rank, world, pg):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1024)
    end = time.monotonic() + SPEND_S
    while time.monotonic() < end:
        client = socket.socket()
        try:
            client.bind(("127.0.0.1", 0))
        except OSError:
            client.close()
            break
        client.connect(listener.getsockname())
        server, _ = listener.accept()
        client.close()      # the side that closes first keeps TIME_WAIT, and with it the port
        server.close()
    listener.close()
    return weights


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
