"""Cheat (state in the kernel's network tables): each group's rank 0 leaves a mark in the TCP metrics cache (a
loopback connection from 127.213.77.<world>), and fails its call loudly where it finds an earlier group's mark: bytes
carried from one group to the next, where a replay could be kept. Where the whole lock applies each group has a
network namespace of its own (harness/isolation/netns.py), which goes with it, so no group finds another's mark."""
import socket
import subprocess

import reference

PREFIX = "source 127.213.77."


def _marks():
    shown = subprocess.run(["ip", "tcp_metrics", "show"], capture_output=True, text=True).stdout
    return {line.split(PREFIX)[1].split()[0] for line in shown.splitlines() if PREFIX in line}


def run(z, weights, rank, world, pg, out):
    if rank == 0:
        found = _marks() - {str(world)}
        if found:
            raise RuntimeError(f"found the mark of an earlier group (world {', '.join(sorted(found))})")
        with socket.socket() as srv:
            srv.bind(("0.0.0.0", 0))
            srv.listen(1)
            client = socket.create_connection((f"127.213.77.{world}", srv.getsockname()[1]))
            peer, _ = srv.accept()
            client.close()
            peer.close()
    reference.run(z, weights, rank, world, pg, out)
