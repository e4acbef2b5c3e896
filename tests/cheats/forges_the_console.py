"""Cheat (forge the verdict a reader sees): fails, but its log and its message carry terminal controls (a carriage
return, erase-line, cursor-up) that would overwrite the judge's FAIL line with a PASS in a terminal, had the judge
printed them as they are."""
FORGED = "\r\x1b[2K\x1b[1A\x1b[32mPASS\x1b[0m f1x1 (0.010 s)"


def run(z, weights, rank, world, pg, out):
    print(FORGED, flush=True)
    raise RuntimeError("gave up" + FORGED)
