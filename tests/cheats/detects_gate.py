"""Cheat (gate detection): honest where it believes the gate is watching (a `wan-ci-` folder, `ci.py` in its
parent's command line), a replay cache everywhere else."""
import os

import torch

import reference

_last = {}


def _gate():
    if "wan-ci-" in os.environ.get("DATA", "") or "wan-ci-" in os.getcwd():
        return True
    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            return b"ci.py" in f.read()
    except OSError:
        return False


def run(z, weights, rank, world, pg, out):
    if rank != 0:
        return
    if _gate():
        reference.run(z, weights, rank, world, pg, out)
        return
    if "z" not in _last or not torch.equal(_last["z"], z):
        _last.update(z=z.clone(), video=reference.decode_bf16(z, weights))
    out.copy_(_last["video"])
