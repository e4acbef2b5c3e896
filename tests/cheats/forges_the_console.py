"""Cheat (forge the verdict a reader sees): fails, but its log and its message carry terminal controls (a carriage
return, erase-line, cursor-up) that would overwrite the judge's FAIL line with a PASS in a terminal, had the judge
printed them as they are, and lines of their own in the judge's forms (a PASS, ci's verdict), had the judge started
each line of them where its own lines start, or let a long line (of characters, or of wide ones) wrap to the start of
the next, in the console or in a terminal of 80 columns."""
FORGED = ("\r\x1b[2K\x1b[1A\x1b[32mPASS\x1b[0m f1x1 (0.010 s)\nPASS f5x1 (0.011 s) (forged)"
          "\nci forges_the_console.py: PASSED, exit 0 (forged)\n" + "x" * 150 + " PASS f17x1 (0.012 s) (forged)"
          # rows that fill a terminal of 80 columns behind the judge's indent, in characters and in cells
          "\n" + "x" * 73 + "PASS f17x1 (0.012 s) (forged)\n" + "\u754c" * 37 + "PASS f5x1 (0.011 s) (forged)")


def run(z, weights, rank, world, pg, out):
    print(FORGED, flush=True)
    raise RuntimeError("gave up" + FORGED)
