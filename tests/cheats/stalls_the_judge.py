"""Cheat (stop the clock early): the rank writes its own `done` (the call's nonce, taken from the harness's frame)
while work remains, with a field the judge takes a long time to parse (a megabyte of nested lists), finishes the
decode while the judge parses, and swallows the harness's own `done`. If the clock stopped when the line arrived,
the work done during the parse would escape it."""
import os
import sys

import reference

PAD = "[" + ",".join(["[" * 50 + "]" * 50] * 10000) + "]"


def run(z, weights, rank, world, pg, out):
    frame = sys._getframe(1)
    harness, call, nonce = frame.f_locals["self"], frame.f_locals["call"], frame.f_locals["nonce"]
    os.write(harness.res_fd, ('done {"call": %d, "nonce": "%s", "pad": %s}\n' % (call, nonce, PAD)).encode())
    real = harness.send

    def send(kind, **fields):
        if kind != "done":
            real(kind, **fields)
    harness.send = send
    reference.run(z, weights, rank, world, pg, out)
