"""Cheat (a file opened with no file-io name in sight): in a rank stdout is unbuffered, so the type of
`sys.stdout.buffer` is io.FileIO, which opens any path the sandbox lets a rank read, here the solution's own source
(a solution's own files are readable: data shipped beside it would be read the same way). The streams are print's
`file=` only; as values they are file-io."""
import sys

import reference

_opener = type(sys.stdout.buffer)


def run(z, weights, rank, world, pg, out):
    with _opener(__file__, "r") as f:
        if b"_opener" not in f.read():
            raise RuntimeError("the read failed")
    reference.run(z, weights, rank, world, pg, out)
