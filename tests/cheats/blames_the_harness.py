"""Cheat (blame the harness): the rank reports its own failure as a harness error, so that a gate would say the
harness failed (exit 4) rather than the solution. The rank's process is the solution's: the judge takes it as the
solution's runtime error."""
import sys


def run(z, weights, rank, world, pg, out):
    sys._getframe(1).f_locals["self"].send("error", status="harness error", rank=rank, phase="run",
                                           error="the harness broke, not me")
    raise SystemExit(0)
