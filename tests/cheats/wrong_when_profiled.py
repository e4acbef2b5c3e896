"""Cheat (a pass earned by the other calls): bench's --profile makes one more call with the named scopes on, after
the workload's timed calls and repeats passed; this one writes zeros on that call only. The profiled call is judged
as every call is: the workload fails with it, and none of its traces is published."""
import reference


def run(z, weights, rank, world, pg, out):
    if reference._SCOPES:             # only the profiled call runs with the named scopes on
        out.zero_()
        return
    reference.run(z, weights, rank, world, pg, out)
