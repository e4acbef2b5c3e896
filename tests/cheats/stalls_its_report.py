"""Cheat (untimed work after `done`, the run held up): decodes honestly, then keeps its `report` line back after each
call's `done` (the harness's send, taken from the frame that calls `run`). The clock stops at `done`, so without a
deadline on the report the rank's main thread gets an untimed window after every call, while the judge and every
frozen group wait for it."""
import sys
import time

import reference

STALL_S = 12.0       # past the report's deadline (harness/judge/pipes.py REPORT_S)


def run(z, weights, rank, world, pg, out):
    harness = sys._getframe(1).f_locals["self"]
    real = harness.send

    def send(kind, **fields):
        if kind == "report":
            time.sleep(STALL_S)     # untimed work would go here
        real(kind, **fields)
    harness.send = send
    reference.run(z, weights, rank, world, pg, out)
